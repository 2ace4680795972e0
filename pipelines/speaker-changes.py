#!/usr/bin/python3
"""Speaker changes of any media file GStreamer can decode, as JSON lines.

  pipelines/speaker-changes.py RECORDING [--rttm OUT.rttm] [--latency 2] [--live] [element props...]

Runs  uridecodebin ! audioconvert ! audioresample ! speakerchange ! fakesink  and prints one JSON
object per change: {"time": s, "speaker": ..., "previous": ..., "confidence": ..., "active": [...],
"delay": s} (and, with identity by voice, "voice": the match score), and per revision (identity by
voice found later that a change was somebody else) {"revises": s, "speaker": ..., "was": ...,
"delay": s, "voice": ...}, "revises" being the time of the change it renames. --rttm also writes
the current-speaker timeline, revisions applied, as RTTM. --live plays the file in
real time (fakesink sync=true, latency mode), as a live source would deliver it. Any further
NAME=VALUE arguments are set as properties of speakerchange (e.g. min-speech=0.5 threads=2).
Progress goes to stderr, and so do the element's warnings and the stretches it could not analyse
(engine=remote with the server away: speaker-change-unanalysed), one line each. Uses the plugin in
build/ when it is not installed.
"""
import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD_PLUGIN = pathlib.Path(os.environ.get("SPEAKERCHANGE_PLUGIN_DIR", ROOT / "build" / "gst" / "speakerchange"))
if BUILD_PLUGIN.is_dir():
    os.environ["GST_PLUGIN_PATH"] = os.pathsep.join(
        p for p in (str(BUILD_PLUGIN), os.environ.get("GST_PLUGIN_PATH", "")) if p)

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import GLib, GObject, Gst  # noqa: E402


def set_checked(element, name, text):
    """Sets a property from its text as gst-launch-1.0 would, but refuses what gst-launch only
    warns about: an unknown property, a value that does not parse, one out of range."""
    factory = element.get_factory().get_name()
    spec = element.find_property(name)
    if spec is None:
        raise ValueError(f"{factory} has no property '{name}' (gst-inspect-1.0 {factory} lists them)")
    if not spec.flags & GObject.ParamFlags.WRITABLE:
        raise ValueError(f"{factory}'s property '{name}' is read-only")
    t = spec.value_type
    bad = f"{name}={text!r}: "
    if t.is_a(GObject.TYPE_ENUM):
        choices = {v.value_nick: v for v in type(spec.default_value).__enum_values__.values()}
        if text not in choices:
            raise ValueError(bad + f"{name} takes one of {', '.join(choices)}")
        value = choices[text]
    elif t == GObject.TYPE_BOOLEAN:
        words = {"true": True, "yes": True, "1": True, "on": True,
                 "false": False, "no": False, "0": False, "off": False}
        if text.lower() not in words:
            raise ValueError(bad + f"{name} takes true or false")
        value = words[text.lower()]
    elif t in (GObject.TYPE_DOUBLE, GObject.TYPE_FLOAT, GObject.TYPE_INT, GObject.TYPE_UINT,
               GObject.TYPE_INT64, GObject.TYPE_UINT64, GObject.TYPE_LONG, GObject.TYPE_ULONG):
        integer = t not in (GObject.TYPE_DOUBLE, GObject.TYPE_FLOAT)
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise ValueError(bad + f"{name} takes {'a whole number' if integer else 'a number'}") from None
        if not spec.minimum <= value <= spec.maximum:
            raise ValueError(bad + f"{name} must be from {spec.minimum:g} to {spec.maximum:g}")
    elif t == GObject.TYPE_STRING:
        value = text
    else:
        Gst.util_set_object_arg(element, name, text)
        return
    element.set_property(name, value)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recording")
    ap.add_argument("--rttm")
    ap.add_argument("--uri-name", help="file name to use in the RTTM (default: the recording's stem)")
    ap.add_argument("--latency", type=float, default=None)
    ap.add_argument("--live", action="store_true")
    ap.add_argument("props", nargs="*", help="NAME=VALUE properties of speakerchange")
    a = ap.parse_intermixed_args()

    Gst.init(None)
    if Gst.ElementFactory.find("speakerchange") is None:
        sys.exit("speakerchange: plugin not found: run scripts/setup.sh (or set GST_PLUGIN_PATH)")
    uri = a.recording if "://" in a.recording else pathlib.Path(a.recording).resolve().as_uri()
    # The decoder's pads are linked by hand, so that only audio is taken and a recording without
    # an audio track is said to be one (a parse_launch link would end in "not-linked").
    pipeline = Gst.parse_launch(
        f'uridecodebin name=src uri="{uri}" audioconvert name=conv ! audioresample ! '
        "audio/x-raw,format=F32LE,rate=16000,channels=1 ! speakerchange name=sc ! "
        f"fakesink sync={'true' if a.live else 'false'}")
    sc = pipeline.get_by_name("sc")
    try:
        if a.latency is not None:
            set_checked(sc, "latency", str(a.latency))
        if a.live:
            set_checked(sc, "mode", "latency")
        for prop in a.props:
            name, eq, value = prop.partition("=")
            if not eq:
                raise ValueError(f"{prop!r}: properties are given as NAME=VALUE")
            set_checked(sc, name, value)
    except ValueError as e:
        sys.exit(f"speakerchange: {e}")

    conv_sink = pipeline.get_by_name("conv").get_static_pad("sink")
    streams = []

    def on_pad_added(_src, pad):
        caps = pad.get_current_caps() or pad.query_caps(None)
        kind = caps.get_structure(0).get_name() if caps and caps.get_size() else "unknown"
        streams.append(kind)
        if kind.startswith("audio/") and not conv_sink.is_linked():
            pad.link(conv_sink)

    def on_no_more_pads(_src):
        if not conv_sink.is_linked():
            found = ", ".join(streams) or "none"
            pipeline.post_message(Gst.Message.new_application(pipeline, Gst.Structure.new_from_string(
                f'no-audio, streams="{found}"')))

    src = pipeline.get_by_name("src")
    src.connect("pad-added", on_pad_added)
    src.connect("no-more-pads", on_no_more_pads)

    def note(text):
        """One line on stderr; on a terminal, over the progress line (redrawn on its next tick)."""
        print(("\r\033[K" if sys.stderr.isatty() else "") + text, file=sys.stderr, flush=True)

    reidentify = sc.get_property("reidentify")
    changes, error, ended, unanalysed = [], None, False, 0.0
    loop = GLib.MainLoop()

    def on_message(bus, msg):
        nonlocal error, ended, unanalysed
        name = msg.get_structure().get_name() if msg.type == Gst.MessageType.ELEMENT else None
        if name == "speaker-change-revision":
            s = msg.get_structure()
            revision = {
                "revises": round(s.get_value("timestamp") / Gst.SECOND, 3),
                "speaker": s.get_string("speaker"),
                "was": s.get_string("previous-speaker"),
                "delay": round(s.get_value("delay") / Gst.SECOND, 3),
                "voice": round(s.get_double("voice-score")[1], 3),
            }
            # The timeline's turn that began at that change is the revision's speaker's.
            for c in reversed(changes):
                if c["time"] == revision["revises"] and c["speaker"]:
                    c["revised"] = revision["speaker"]
                    break
            print(json.dumps(revision), flush=True)
        elif name == "speaker-change":
            s = msg.get_structure()
            active = s.get_value("active-speakers")
            change = {
                "time": round(s.get_value("timestamp") / Gst.SECOND, 3),
                "speaker": s.get_string("speaker"),
                "previous": s.get_string("previous-speaker"),
                "confidence": round(s.get_double("confidence")[1], 3),
                "active": list(active) if active is not None else [],
                "delay": round(s.get_value("delay") / Gst.SECOND, 3),
            }
            if reidentify:
                change["voice"] = round(s.get_double("voice-score")[1], 3)
            changes.append(change)
            print(json.dumps(change), flush=True)
        elif name == "speaker-change-unanalysed":
            s = msg.get_structure()
            unanalysed = s.get_double("unanalysed-seconds")[1]
            stretch = (f"{s.get_double('unanalysed-seconds')[1]:.1f} s of stream time unanalysed "
                       f"({s.get_uint64('unanalysed-windows')[1]} windows dropped)")
            if s.get_boolean("engine-available")[1]:
                note(f"speakerchange: the inference engine answers again; {stretch} in all")
            else:
                note(f"speakerchange: {stretch} so far: {s.get_string('reason')}")
        elif msg.type == Gst.MessageType.WARNING:
            warning, debug = msg.parse_warning()
            # The debug text begins with where in the source it was posted; the rest says more.
            more = " ".join(debug.split("\n", 1)[1].split()) if debug and "\n" in debug else ""
            note(f"speakerchange: warning: {warning.message}" + (f" ({more})" if more else ""))
        elif msg.type == Gst.MessageType.APPLICATION and msg.get_structure().get_name() == "no-audio":
            error = (f"{a.recording} has no audio track (its streams: "
                     f"{msg.get_structure().get_string('streams')})")
            loop.quit()
        elif msg.type == Gst.MessageType.ERROR:
            err, debug = msg.parse_error()
            error = f"{err.message}" + (f" ({debug})" if debug else "")
            loop.quit()
        elif msg.type == Gst.MessageType.EOS:
            ended = True
            loop.quit()

    def progress():
        ok, pos = pipeline.query_position(Gst.Format.TIME)
        ok2, dur = pipeline.query_duration(Gst.Format.TIME)
        if ok and ok2 and dur > 0:
            print(f"\rspeakerchange: {pos / Gst.SECOND:8.1f} / {dur / Gst.SECOND:.1f} s", end="", file=sys.stderr)
        return True

    bus = pipeline.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    if sys.stderr.isatty():
        GLib.timeout_add(500, progress)
    pipeline.set_state(Gst.State.PLAYING)
    try:
        loop.run()
    except KeyboardInterrupt:
        pass
    ok, end = pipeline.query_position(Gst.Format.TIME)
    pipeline.set_state(Gst.State.NULL)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if error:
        sys.exit(f"speakerchange: {error}")
    # No changes is a valid result, but an empty output looks like a failure from the outside.
    if ended and not any(c["speaker"] for c in changes):
        if unanalysed:
            print(f"speakerchange: no speech found in what was analysed of {a.recording} "
                  f"({unanalysed:.1f} s of its stream time went unanalysed)", file=sys.stderr)
        else:
            print(f"speakerchange: no speech found in {a.recording}", file=sys.stderr)

    if a.rttm:
        name = a.uri_name or pathlib.Path(a.recording).stem
        end_s = end / Gst.SECOND if ok else (changes[-1]["time"] if changes else 0)
        with open(a.rttm, "w") as f:
            for c, nxt in zip(changes, changes[1:] + [None]):
                stop = nxt["time"] if nxt else end_s
                if c["speaker"] and stop > c["time"]:
                    who = c.get("revised", c["speaker"])
                    f.write(f"SPEAKER {name} 1 {c['time']:.3f} {stop - c['time']:.3f} <NA> <NA> {who} <NA> <NA>\n")


if __name__ == "__main__":
    main()
