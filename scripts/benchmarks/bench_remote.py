#!/usr/bin/env python3
"""The remote engine against the local CPU engine, same machine, one run (a benchmark, not a test):
the Open Inference Protocol server (scripts/servers/oip_server.py: KServe's model server running
ONNX Runtime on the CPU) on loopback, and for each batch size the windows/s and the median and p99
per request of `speakerseg bench --engine remote` beside `--engine cpu`; then N live channels in
real time through one shared engine of each kind (`speakerseg live`): the delay inference adds to
announcements, p50 and p95. Prints each exact command and the ratios remote / cpu.

What it measures on one machine is the protocol's cost (serialising 0.64 MB per window, gRPC,
KServe's Python, a second copy of the work in another process) and ONNX Runtime against our
engine; what a GPU tier gains is not here (docs/scale-out.md).

  .venv/bin/python3 scripts/benchmarks/bench_remote.py [--batches 1 8 32] [--seconds 5]
      [--channels 8] [--threads N]
      (N: the CPU engine's threads and the server's ONNX Runtime threads)
"""
import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "servers"))
import oip_process  # noqa: E402


def run_json(command):
    print("$", shlex.join(command), flush=True)
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--speakerseg", default=str(ROOT / "build" / "tools" / "speakerseg"))
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--channels", type=int, default=8)
    p.add_argument("--live-seconds", type=float, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    a = p.parse_args()
    print(f"{cpu_name()}, {os.cpu_count()} cores; threads {a.threads}")
    rows, live = [], []
    with oip_process.Server(sys.executable, ["--threads", str(a.threads)]) as server:
        engines = {"cpu": ["--engine", "cpu", "--threads", str(a.threads)],
                   "remote": ["--engine", "remote", "--server", server.grpc]}
        for batch in a.batches:
            r = {}
            for name, args in engines.items():
                r[name] = run_json([a.speakerseg, "bench", "--json", "--batch", str(batch),
                                    "--seconds", str(a.seconds), *args])
            rows.append((batch, r))
        for name, args in engines.items():
            live.append((name, run_json([a.speakerseg, "live", "--channels", str(a.channels),
                                         "--seconds", str(a.live_seconds), "--warmup", "5",
                                         *args])))
    print(f"\n{'batch':>5} {'cpu win/s':>10} {'remote win/s':>13} {'remote/cpu':>10} "
          f"{'cpu med ms':>10} {'remote med ms':>13} {'cpu p99':>8} {'remote p99':>10}")
    for batch, r in rows:
        c, m = r["cpu"], r["remote"]
        print(f"{batch:>5} {c['windows_per_s']:>10.1f} {m['windows_per_s']:>13.1f} "
              f"{m['windows_per_s'] / c['windows_per_s']:>10.2f} {c['median_ms']:>10.1f} "
              f"{m['median_ms']:>13.1f} {c['p99_ms']:>8.1f} {m['p99_ms']:>10.1f}")
    print(f"\n{a.channels} live channels, one shared engine, {a.live_seconds:.0f} s after 5 s:")
    for name, r in live:
        print(f"  {name:>6}: added delay p50 {r['added_p50_s']} s, p95 {r['added_p95_s']} s, "
              f"max batch {r['max_batch']}, dropped windows {r['dropped_windows']}, ok {r['ok']}")


if __name__ == "__main__":
    main()
