#!/usr/bin/env python3
"""Several processes on one Open Inference Protocol server: scripts/servers/oip_server.py started
once, then `speakerseg changes --engine remote` on three recordings at the same time, each against
the same recording through the local CPU engine. The server runs ONNX Runtime, which the CPU engine
is held to within 1e-3 per log-probability: the same changes (speakers in order), times within two
frames.

  check_processes.py SPEAKERSEG MODEL DATA_DIR   (run by the tooling's Python: it starts the server)
"""
import json
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "scripts" / "servers"))
import oip_process  # noqa: E402

TWO_FRAMES = 2 * 270 / 16000  # s


def changes(output):
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def main():
    speakerseg, model, data = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    recordings = [data / name for name in ("sample.wav", "dev00.wav", "trn00.wav")]
    missing = [str(r) for r in recordings if not r.is_file()]
    if missing:
        sys.exit(f"FAIL: missing {missing} (../shared/data)")
    local = {r: changes(subprocess.run([speakerseg, "changes", "--model", model, "--input", str(r),
                                        "--engine", "cpu", "--threads", "1"], check=True,
                                       capture_output=True, text=True).stdout)
             for r in recordings}
    failures = []
    with oip_process.Server(sys.executable, ["--instances", "2", "--threads", "1"]) as server:
        t = time.monotonic()
        runs = {r: subprocess.Popen([speakerseg, "changes", "--input", str(r), "--engine", "remote",
                                     "--server", server.grpc], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
                for r in recordings}
        for r, p in runs.items():
            out, err = p.communicate()
            if p.returncode != 0:
                failures.append(f"{r.name}: exit status {p.returncode}: {err.strip()}")
                continue
            got, want = changes(out), local[r]
            print(f"{r.name}: {len(got)} changes through the server, {len(want)} with the CPU engine")
            if [(c["speaker"], c["previous"]) for c in got] != [(c["speaker"], c["previous"]) for c in want]:
                failures.append(f"{r.name}: speakers differ:\n  remote {got}\n  cpu    {want}")
            elif any(abs(a["time"] - b["time"]) > TWO_FRAMES for a, b in zip(got, want)):
                failures.append(f"{r.name}: times differ:\n  remote {got}\n  cpu    {want}")
        print(f"three processes on one server ({server.grpc}): {time.monotonic() - t:.1f} s")
    if server.exit_status != 0:
        failures.append(f"the server exited with status {server.exit_status} on SIGTERM")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
