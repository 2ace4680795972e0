#!/usr/bin/python3
"""Speaker changes of any media file GStreamer can decode, as JSON lines.

  pipelines/speaker-changes.py RECORDING [--rttm OUT.rttm] [--latency 2] [--live] [element props...]

Runs  uridecodebin ! audioconvert ! audioresample ! speakerchange ! fakesink  and prints one JSON
object per change: {"time": s, "speaker": ..., "previous": ..., "confidence": ..., "active": [...],
"delay": s} (and, with identity by voice, "voice": the match score), and per revision (identity by
voice found later that a change was somebody else) {"revises": s, "speaker": ..., "was": ...,
"delay": s, "voice": ...}, "revises" being the time of the change it renames. --rttm also writes
the current-speaker timeline, revisions applied, as RTTM. --live plays the file in
real time (fakesink sync=true, latency mode), as a live source would deliver it, and adds each
change's "lag": seconds from its time to its announcement on the pipeline clock (its `delay`, plus
inference and, with engine=remote, an outage of the server). A change also carries "stalled" for
a live feed that stopped, and "timeline" and "new-timeline" once a new time line began (see
speakerchange_app.py). Any further
NAME=VALUE arguments are set as properties of speakerchange (e.g. min-speech=0.5 threads=2).
Progress goes to stderr, and so do the element's warnings and the stretches it could not analyse
(engine=remote with the server away: speaker-change-unanalysed), one line each. Uses the plugin in
build/ when it is not installed.
"""
import argparse
import json
import pathlib
import sys

import speakerchange_app as app  # before GStreamer: it points GStreamer at the build's plugin
from gi.repository import GLib, Gst


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
            app.set_checked(sc, "latency", str(a.latency))
        if a.live:
            app.set_checked(sc, "mode", "latency")
        app.set_all(sc, a.props)
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

    reidentify = sc.get_property("reidentify")
    changes, error, ended, unanalysed = [], None, False, 0.0
    loop = GLib.MainLoop()

    def on_message(bus, msg):
        nonlocal error, ended, unanalysed
        name = msg.get_structure().get_name() if msg.type == Gst.MessageType.ELEMENT else None
        if name == "speaker-change-revision":
            revision = app.revision(msg.get_structure())
            # The timeline's turn that began at that change is the revision's speaker's.
            for c in reversed(changes):
                if c["time"] == revision["revises"] and c["speaker"]:
                    c["revised"] = revision["speaker"]
                    break
            print(json.dumps(revision), flush=True)
        elif name == "speaker-change":
            change = app.change(msg.get_structure(), reidentify, pipeline if a.live else None)
            print(json.dumps(change), flush=True)
            changes.append(change)
        elif name == "speaker-change-unanalysed":
            line, unanalysed = app.unanalysed(msg.get_structure())
            app.note(line)
        elif msg.type == Gst.MessageType.WARNING:
            app.note(app.warning(msg))
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
