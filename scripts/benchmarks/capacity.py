#!/usr/bin/python3
"""How many live channels one process sustains: speakerchange with the shared engine on and off.

  /usr/bin/python3 scripts/benchmarks/capacity.py [--shared on off] [--seconds 60] [--warmup 20]
                                                  [--core] [--start 8] [--max 1024] [--step 1]
                                                  [--latency 2] [--replay] [--threads-shared 2]
                                                  [--threads-own 1] [--in-flight 1]
                                                  [--feeders 1] [--batch 32]
                                                  [--device-ms FIXED,PER_WINDOW] [NAME=VALUE ...]

Every trial runs N channels in one pipeline of a fresh process (this script with --trial N):
per channel  appsrc (is-live, 100 ms buffers, min-latency 100 ms) ! speakerchange ! fakesink
sync=true , fed in real time from the pipeline clock with the recordings of
../shared/data/pyannote-debug looped, each channel from another offset. It records, for every
speaker change announced after --warmup seconds, the wall-clock announcement delay (pipeline
running time when the bus message is posted minus the change's running-time) and what load added
to it: that delay minus the element's own `delay` field (how far behind the newest audio the
change became final, i.e. latency, step and min-speech/min-silence, which no engine speed
changes). A trial passes when the p95 of the added delay is at most --slack (0.5 s) and no
channel dropped a window (speaker-change-stats `dropped-windows`); i.e. announcements arrive
within the element's latency promise + 0.5 s, with no audio skipped.

--core runs each trial with `speakerseg live` instead (the same streaming logic, windows and shared
scheduler without GStreamer, one process; its added delay is measured the same way), which is how
the GPU check measures the CUDA engine where GStreamer is not installed. --core --replay hands out
the engine's answers, computed before the trial, at once: the host side's own ceiling.
--in-flight N gives the shared engine N engines with a batch in flight each (the element's
batches-in-flight, `speakerseg live --in-flight`); --feeders N (with --core) feeds the channels
from N threads, as N streaming threads would; --batch N (with --core) is the shared engine's batch;
--device-ms FIXED,PER_WINDOW (with --core --replay) makes each replayed batch wait as a device
would, without using a core (`speakerseg live --replay-device-ms`): a model, not a GPU. --reidentify
(with --core) turns identity by voice on; with --replay the voice encoder is replayed as well.
--stitch-threads N (with --core): threads that stitch each batch's channels after its forward pass.

The search doubles N from --start until a trial fails, then bisects to within 1/16 of N. One line
of JSON per trial, then a table with the largest N per configuration and the ratio. Any further
NAME=VALUE arguments are set on every speakerchange (e.g. max-batch-wait=0). Not a test: it
runs for minutes and needs the machine to itself.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

from live_audio import RATE, ROOT, Gst, read_recordings, rss_mib

BUFFER = RATE // 10  # 100 ms buffers, as capture sources commonly deliver


def trial(a):
    """One trial in this process: prints one JSON object."""
    Gst.init(None)
    audio = read_recordings()
    n = a.trial
    shared = a.shared[0] == "on"
    threads = a.threads_shared if shared else a.threads_own
    pipeline = Gst.Pipeline.new("capacity")
    srcs, elements = [], []
    caps = Gst.Caps.from_string("audio/x-raw,format=F32LE,rate=16000,channels=1,layout=interleaved")
    for i in range(n):
        src = Gst.ElementFactory.make("appsrc", f"src{i}")
        src.set_property("is-live", True)
        src.set_property("format", Gst.Format.TIME)
        src.set_property("caps", caps)
        src.set_property("max-bytes", 0)
        src.set_property("min-latency", Gst.util_uint64_scale(BUFFER, Gst.SECOND, RATE))
        sc = Gst.ElementFactory.make("speakerchange", f"sc{i}")
        if sc is None:
            raise SystemExit("no speakerchange element: build the plugin (scripts/setup.sh) first")
        for name, value in (("shared-engine", shared), ("threads", threads), ("step", a.step),
                            ("latency", a.latency), ("stats-interval", 1.0), ("emit-events", False)):
            sc.set_property(name, value)
        for prop in a.props:
            name, _, value = prop.partition("=")
            Gst.util_set_object_arg(sc, name, value)
        sink = Gst.ElementFactory.make("fakesink", f"sink{i}")
        sink.set_property("sync", True)
        for e in (src, sc, sink):
            pipeline.add(e)
        src.link(sc)
        sc.link(sink)
        srcs.append(src)
        elements.append(sc)
    index = {sc.get_name(): i for i, sc in enumerate(elements)}

    clock = Gst.SystemClock.obtain()
    pipeline.use_clock(clock)
    lock = threading.Lock()
    added, wall, batches = [], [], []
    dropped = [0] * n
    errors = []

    def now_running():
        return clock.get_time() - pipeline.get_base_time()

    def on_sync_message(bus, msg):
        # Runs in the posting thread, so "now" is when the element announced it.
        if msg.type == Gst.MessageType.ELEMENT:
            s = msg.get_structure()
            if s.get_name() == "speaker-change":
                rt = s.get_value("running-time")
                if rt / Gst.SECOND >= a.warmup:
                    d = (now_running() - rt) / Gst.SECOND
                    with lock:
                        wall.append(d)
                        added.append(d - s.get_value("delay") / Gst.SECOND)
            elif s.get_name() == "speaker-change-stats":
                with lock:
                    dropped[index[msg.src.get_name()]] = s.get_value("dropped-windows")
                    batches.append(s.get_value("last-batch-size"))
        elif msg.type == Gst.MessageType.ERROR:
            with lock:
                errors.append(msg.parse_error()[0].message)
        return Gst.BusSyncReply.PASS

    bus = pipeline.get_bus()
    bus.enable_sync_message_emission()
    bus.connect("sync-message", on_sync_message)

    t0 = time.time()
    if pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        raise SystemExit("the pipeline did not start: " + "; ".join(errors))
    load_s = time.time() - t0
    offsets = [int(i * 7.3 * RATE) % len(audio) for i in range(n)]
    total = int((a.warmup + a.seconds) * RATE)
    cpu0 = os.times()
    start_wall = time.time()
    pos = 0
    while pos < total and not errors:
        # Capture-like: a buffer goes out once its last sample is in the past.
        due = Gst.util_uint64_scale(pos + BUFFER, Gst.SECOND, RATE)
        wait = (due - now_running()) / Gst.SECOND
        if wait > 0:
            time.sleep(wait)
        pts = Gst.util_uint64_scale(pos, Gst.SECOND, RATE)
        dur = Gst.util_uint64_scale(BUFFER, Gst.SECOND, RATE)
        for i, src in enumerate(srcs):
            off = (offsets[i] + pos) % (len(audio) - BUFFER)
            buf = Gst.Buffer.new_wrapped(audio[off:off + BUFFER].tobytes())
            buf.pts, buf.duration = pts, dur
            src.emit("push-buffer", buf)
        pos += BUFFER
    cpu1 = os.times()
    wall_s = time.time() - start_wall
    rss = rss_mib()
    pipeline.set_state(Gst.State.NULL)

    added_a = np.array(added) if added else np.array([np.nan])
    wall_a = np.array(wall) if wall else np.array([np.nan])
    ok = (not errors and bool(added) and float(np.nanpercentile(added_a, 95)) <= a.slack
          and sum(dropped) == 0)
    r = {
        "channels": n, "shared": shared, "threads": threads, "step": a.step, "latency": a.latency,
        "props": a.props, "ok": ok, "changes": len(added),
        "added_p50_s": round(float(np.nanpercentile(added_a, 50)), 3),
        "added_p95_s": round(float(np.nanpercentile(added_a, 95)), 3),
        "added_max_s": round(float(np.nanmax(added_a)), 3),
        "delay_p95_s": round(float(np.nanpercentile(wall_a, 95)), 3),
        "dropped_windows": int(sum(dropped)), "channels_dropping": sum(1 for d in dropped if d),
        "mean_batch": round(float(np.mean(batches)), 1) if batches else None,
        "cpu_percent": round(100 * ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) / wall_s),
        "rss_mib": round(rss), "start_s": round(load_s, 1), "errors": errors[:3],
    }
    print(json.dumps(r), flush=True)


def run_trial(a, n, shared):
    if a.core:
        # The same trial without GStreamer: the element's streaming logic in `speakerseg live`.
        cmd = [str(a.speakerseg), "live", "--channels", str(n), "--seconds", str(a.seconds),
               "--warmup", str(a.warmup), "--step", str(a.step), "--latency", str(a.latency),
               "--engine", a.engine, "--threads",
               str(a.threads_shared if shared == "on" else a.threads_own), "--precision", a.precision] + (
                   ["--own"] if shared == "off" else []) + (["--replay"] if a.replay else []) + [
                   "--in-flight", str(a.in_flight), "--feeders", str(a.feeders)] + (
                   ["--batch", str(a.batch)] if a.batch else []) + (
                   ["--replay-device-ms", a.device_ms] if a.device_ms else []) + (
                   ["--device-audio"] if a.device_audio else []) + (
                   ["--reidentify"] if a.reidentify else []) + (
                   ["--stitch-threads", str(a.stitch_threads)] if a.stitch_threads is not None else [])
    else:
        cmd = [sys.executable, __file__, "--trial", str(n), "--shared", shared, "--seconds", str(a.seconds),
               "--warmup", str(a.warmup), "--step", str(a.step), "--latency", str(a.latency),
               "--slack", str(a.slack), "--threads-shared", str(a.threads_shared),
               "--threads-own", str(a.threads_own)] + a.props + (
                   [f"batches-in-flight={a.in_flight}"] if a.in_flight > 1 else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        r = {"channels": n, "shared": shared == "on", "ok": False,
             "errors": [out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"]}
    else:
        r = json.loads(lines[-1])
    print(json.dumps(r), flush=True)
    return r


def search(a, shared):
    lo, hi, n = 0, None, a.start
    while n <= a.max:
        if run_trial(a, n, shared)["ok"]:
            lo = n
            n *= 2
        else:
            hi = n
            break
    if hi is None:
        return lo, f">= {lo} (search limit)"
    while hi - lo > max(1, lo // 16):
        mid = (lo + hi) // 2
        if run_trial(a, mid, shared)["ok"]:
            lo = mid
        else:
            hi = mid
    return lo, f"{lo} (fails at {hi})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", nargs="+", default=["on", "off"], choices=["on", "off"])
    ap.add_argument("--seconds", type=float, default=60, help="measured seconds of audio per trial")
    ap.add_argument("--warmup", type=float, default=20, help="seconds before changes are counted")
    ap.add_argument("--start", type=int, default=8)
    ap.add_argument("--max", type=int, default=1024)
    ap.add_argument("--step", type=float, default=1.0)
    ap.add_argument("--latency", type=float, default=2.0)
    ap.add_argument("--slack", type=float, default=0.5, help="p95 of the delay load may add, seconds")
    ap.add_argument("--threads-shared", type=int, default=2, help="threads of the one shared engine")
    ap.add_argument("--threads-own", type=int, default=1, help="threads of each channel's own engine")
    ap.add_argument("--core", action="store_true",
                    help="run the trials with `speakerseg live` (core streaming logic, no GStreamer)")
    ap.add_argument("--engine", default="cpu", help="with --core: cpu or cuda")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="with --core: the CPU engine's LSTM precision (else the element's "
                         "precision=... property)")
    ap.add_argument("--replay", action="store_true",
                    help="with --core: the engine's answers computed first and replayed at once "
                         "(speakerseg live --replay): the host side's own ceiling")
    ap.add_argument("--in-flight", type=int, default=1,
                    help="batches the shared engine runs at once, each on an engine of its own")
    ap.add_argument("--feeders", type=int, default=1,
                    help="with --core: threads that feed the channels their buffers")
    ap.add_argument("--batch", type=int, help="with --core: the shared engine's batch size")
    ap.add_argument("--device-ms", help="with --core --replay: FIXED,PER_WINDOW ms a batch waits")
    ap.add_argument("--device-audio", action="store_true",
                    help="with --core: streams' audio kept on the device (--replay: its host side)")
    ap.add_argument("--stitch-threads", type=int,
                    help="with --core: threads that stitch each batch (`speakerseg live --stitch-threads`; "
                         "default: its default, one per core)")
    ap.add_argument("--reidentify", action="store_true",
                    help="with --core: identity by voice on (with --replay the voice encoder is replayed too)")
    ap.add_argument("--speakerseg", default=str(ROOT / "build" / "tools" / "speakerseg"))
    ap.add_argument("--trial", type=int, help=argparse.SUPPRESS)
    ap.add_argument("props", nargs="*", help="NAME=VALUE properties of every speakerchange")
    a = ap.parse_intermixed_args()
    if a.trial:
        return trial(a)

    print(f"# command: /usr/bin/python3 scripts/benchmarks/capacity.py {' '.join(sys.argv[1:])}",
          flush=True)
    print(f"# {os.cpu_count()} CPUs; {a.seconds:g} s measured after {a.warmup:g} s per trial", flush=True)
    found = {}
    for shared in a.shared:
        found[shared] = search(a, shared)
    print("\n| shared engine | threads | largest N sustained |\n|---|---:|---|")
    for shared, (n, text) in found.items():
        print(f"| {shared} | {a.threads_shared if shared == 'on' else a.threads_own} per "
              f"{'process' if shared == 'on' else 'channel'} | {text} |")
    if "on" in found and "off" in found and found["off"][0] > 0:
        print(f"\nshared / own: {found['on'][0] / found['off'][0]:.2f}x")


if __name__ == "__main__":
    main()
