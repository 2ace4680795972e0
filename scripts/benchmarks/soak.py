#!/usr/bin/python3
"""Soak test: hours of audio through a live, clock-synchronised speakerchange pipeline.

  /usr/bin/python3 scripts/benchmarks/soak.py [--minutes 120] [--report-every 60] [--json OUT.jsonl]

appsrc (is-live, timestamps from a running sample count) loops the recordings of
../shared/data/pyannote-debug into  speakerchange ! fakesink sync=true , so audio arrives at real
time as from a capture card. Every --report-every seconds of audio it prints the process's resident
memory, the number of changes so far, and the mean / p95 / max announcement delay of the changes
in that interval. Not part of the test suite (it runs for as long as it says).
"""
import argparse
import json
import sys
import threading
import time

import numpy as np

from live_audio import DATA, RATE, GLib, Gst, read_recordings, rss_mib

CHUNK = RATE // 50  # 20 ms buffers


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=120)
    ap.add_argument("--report-every", type=float, default=60)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--json", help="also append each report as a JSON line to this file")
    ap.add_argument("props", nargs="*", help="NAME=VALUE properties of speakerchange")
    a = ap.parse_intermixed_args()

    Gst.init(None)
    audio = read_recordings(a.data)
    pipeline = Gst.parse_launch(
        "appsrc name=src is-live=true format=time block=true max-bytes=64000 "
        "caps=audio/x-raw,format=F32LE,rate=16000,channels=1,layout=interleaved ! "
        "speakerchange name=sc ! fakesink sync=true")
    src, sc = pipeline.get_by_name("src"), pipeline.get_by_name("sc")
    for prop in a.props:
        name, _, value = prop.partition("=")
        Gst.util_set_object_arg(sc, name, value)
    total = int(a.minutes * 60 * RATE)
    stop = threading.Event()

    def feed():
        pos = 0
        while pos < total and not stop.is_set():
            off = pos % len(audio)
            n = min(CHUNK, len(audio) - off, total - pos)
            buf = Gst.Buffer.new_wrapped(audio[off:off + n].tobytes())
            buf.pts = Gst.util_uint64_scale(pos, Gst.SECOND, RATE)
            buf.duration = Gst.util_uint64_scale(n, Gst.SECOND, RATE)
            if src.emit("push-buffer", buf) != Gst.FlowReturn.OK:
                return
            pos += n
        src.emit("end-of-stream")

    delays, reports, count = [], [], [0]
    next_report = [a.report_every]
    loop = GLib.MainLoop()
    start = time.time()

    def report(audio_s):
        d = np.array(delays) if delays else np.array([np.nan])
        r = {"audio_s": round(audio_s, 1), "wall_s": round(time.time() - start, 1), "rss_mib": round(rss_mib(), 1),
             "changes": count[0], "delay_mean_s": round(float(np.nanmean(d)), 3),
             "delay_p95_s": round(float(np.nanpercentile(d, 95)), 3), "delay_max_s": round(float(np.nanmax(d)), 3)}
        print(json.dumps(r), flush=True)
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(r) + "\n")
        delays.clear()

    def on_message(bus, msg):
        if msg.type == Gst.MessageType.ELEMENT and msg.get_structure().get_name() == "speaker-change":
            s = msg.get_structure()
            t = s.get_value("timestamp") / Gst.SECOND
            delay = s.get_value("delay") / Gst.SECOND
            count[0] += 1
            delays.append(delay)
            now_audio = t + delay
            while now_audio >= next_report[0]:
                report(next_report[0])
                next_report[0] += a.report_every
        elif msg.type in (Gst.MessageType.EOS, Gst.MessageType.ERROR):
            if msg.type == Gst.MessageType.ERROR:
                print("error:", msg.parse_error()[0].message, file=sys.stderr)
            loop.quit()

    bus = pipeline.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    pipeline.set_state(Gst.State.PLAYING)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        loop.run()
    except KeyboardInterrupt:
        pass
    stop.set()
    pipeline.set_state(Gst.State.NULL)
    if delays:
        report(a.minutes * 60)


if __name__ == "__main__":
    main()
