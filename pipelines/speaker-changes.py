#!/usr/bin/python3
"""Speaker changes of any media file GStreamer can decode, as JSON lines.

  pipelines/speaker-changes.py RECORDING [--rttm OUT.rttm] [--latency 2] [--live] [element props...]

Runs  uridecodebin ! audioconvert ! audioresample ! speakerchange ! fakesink  and prints one JSON
object per change: {"time": s, "speaker": ..., "previous": ..., "confidence": ..., "active": [...],
"delay": s} (and, with identity by voice, "voice": the match score). --rttm also writes the current-speaker timeline as RTTM. --live plays the file in
real time (fakesink sync=true, latency mode), as a live source would deliver it. Any further
NAME=VALUE arguments are set as properties of speakerchange (e.g. min-speech=0.5 threads=2).
Progress goes to stderr. Uses the plugin in build/ when it is not installed.
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
from gi.repository import GLib, Gst  # noqa: E402


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
    pipeline = Gst.parse_launch(
        f'uridecodebin uri="{uri}" ! audioconvert ! audioresample ! '
        "audio/x-raw,format=F32LE,rate=16000,channels=1 ! speakerchange name=sc ! "
        f"fakesink sync={'true' if a.live else 'false'}")
    sc = pipeline.get_by_name("sc")
    if a.latency is not None:
        sc.set_property("latency", a.latency)
    if a.live:
        sc.set_property("mode", "latency")
    for prop in a.props:
        name, _, value = prop.partition("=")
        Gst.util_set_object_arg(sc, name, value)

    reidentify = sc.get_property("reidentify")
    changes, error = [], None
    loop = GLib.MainLoop()

    def on_message(bus, msg):
        nonlocal error
        if msg.type == Gst.MessageType.ELEMENT and msg.get_structure().get_name() == "speaker-change":
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
        elif msg.type == Gst.MessageType.ERROR:
            err, debug = msg.parse_error()
            error = f"{err.message}" + (f" ({debug})" if debug else "")
            loop.quit()
        elif msg.type == Gst.MessageType.EOS:
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

    if a.rttm:
        name = a.uri_name or pathlib.Path(a.recording).stem
        end_s = end / Gst.SECOND if ok else (changes[-1]["time"] if changes else 0)
        with open(a.rttm, "w") as f:
            for c, nxt in zip(changes, changes[1:] + [None]):
                stop = nxt["time"] if nxt else end_s
                if c["speaker"] and stop > c["time"]:
                    f.write(f"SPEAKER {name} 1 {c['time']:.3f} {stop - c['time']:.3f} <NA> <NA> {c['speaker']} <NA> <NA>\n")


if __name__ == "__main__":
    main()
