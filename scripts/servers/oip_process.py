"""Starts scripts/servers/oip_server.py (the Open Inference Protocol test server) as a child process
on free loopback ports and waits for its ready line; for the scripts and Python tests that need a
server (oip_check.py, bench_remote.py, tests/engines/remote/check_processes.py). The C++ tests'
counterpart is tests/common/oip_server.h.

  with oip_process.Server(python, ["--threads", "2"]) as s: ... s.grpc, s.http ...
"""
import pathlib
import subprocess
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Server:
    """The running server: .grpc and .http are HOST:PORT; .started_in the seconds to ready. Leaving
    the `with` block stops it with SIGTERM and waits; .exit_status is its status then."""

    def __init__(self, python, args=(), timeout=120.0):
        self.command = [str(python), str(ROOT / "scripts" / "servers" / "oip_server.py"),
                        "--grpc-port", "0", "--http-port", "0", *args]
        self.timeout = timeout
        self.exit_status = None

    def __enter__(self):
        t = time.monotonic()
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, text=True)
        lines = []  # the ready line, or "" if it died
        reader = threading.Thread(target=lambda: lines.append(self.process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(self.timeout)
        line = lines[0] if lines else f"nothing in {self.timeout:.0f} s"
        if not line.startswith("ready "):
            self.process.kill()
            raise SystemExit(f"{' '.join(self.command)} printed {line!r}, exit status "
                             f"{self.process.wait()}")
        fields = dict(f.split("=", 1) for f in line.split()[1:])
        self.grpc, self.http = fields["grpc"], fields["http"]
        self.started_in = time.monotonic() - t
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        try:
            self.exit_status = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.exit_status = self.process.wait()
        self.process.stdout.close()
        return False
