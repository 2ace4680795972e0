#!/usr/bin/python3
"""Runs an example of examples/ and checks what it prints against `speakerseg changes` (the core on
its own, the same streaming logic): the same changes, speakers and times.

  check_examples.py print-changes  SPEAKERSEG MODEL WAV  EXE [PROPERTY=VALUE...]
  check_examples.py python         SPEAKERSEG MODEL WAV  PYTHON SCRIPT
  check_examples.py monitor        SPEAKERSEG MODEL NAME=WAV...  EXE

Exits 77 (skipped) when a recording is missing, unless CI=true.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "common"))
import gst_plugins  # noqa: E402

# What the examples' pipelines (uridecodebin of a WAV file ! audioconvert ! audioresample !
# speakerchange ! appsink or fakesink) load.
PLUGINS = ("coreelements", "playback", "typefindfunctions", "wavparse", "audioconvert", "audioresample",
           "app")

# "   6.663 s  nobody -> speaker-0  active [speaker-0]  confidence 0.847  delay 2.337 s", after a
# source ("bus", "stream") or a channel tag ("[studio-a]"), or nothing (the Python example).
CHANGE = re.compile(r"^(?P<tag>\S+)?\s+(?P<time>\d+\.\d{3}) s  (?P<previous>\S+) -> (?P<speaker>\S+)"
                    r"  active \[(?P<active>[^\]]*)\]  confidence (?P<confidence>[\d.]+)"
                    r"  delay (?P<delay>[\d.]+) s")
TOLERANCE = 0.002  # s: the examples print milliseconds


def parse(stdout):
    out = []
    for line in stdout.splitlines():
        m = CHANGE.match(line)
        if m:
            name = lambda s: "" if s == "nobody" else s  # noqa: E731
            out.append({"tag": m["tag"], "time": float(m["time"]), "previous": name(m["previous"]),
                        "speaker": name(m["speaker"]), "active": [a for a in m["active"].split(",") if a],
                        "confidence": float(m["confidence"]), "delay": float(m["delay"])})
    return out


def core_changes(speakerseg, model, wav):
    run = subprocess.run([speakerseg, "changes", "--model", model, "--input", wav, "--threads", "1"],
                         check=True, capture_output=True, text=True)
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def compare(what, got, core):
    """Failures (empty when `got` announces what the core announces)."""
    if not core:
        return [f"{what}: the core finds no change in this recording, nothing to compare"]
    if len(got) != len(core):
        return [f"{what}: {len(got)} changes, the core finds {len(core)}:\n  {got}\n  {core}"]
    fails = []
    for i, (g, c) in enumerate(zip(got, core)):
        same = (g["speaker"] == c["speaker"] and g["previous"] == c["previous"]
                and g["active"] == c["active"] and abs(g["time"] - c["time"]) <= TOLERANCE
                and abs(g["delay"] - c["delay"]) <= TOLERANCE and abs(g["confidence"] - c["confidence"]) <= 0.002)
        if not same:
            fails.append(f"{what}: change {i} is {g}, the core's is {c}")
    return fails


def run(cmd):
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(proc.stdout, end="")
    if proc.returncode != 0:
        sys.exit(f"FAIL: exit status {proc.returncode}\n{proc.stderr}")
    return proc.stdout


def need(path):
    if not pathlib.Path(path).is_file():
        if os.environ.get("CI") == "true":
            sys.exit(f"FAIL: {path} is missing")
        print(f"SKIP: {path} is missing")
        sys.exit(77)


def main():
    mode, speakerseg, model = sys.argv[1:4]
    gst_plugins.use_only(*PLUGINS)
    rest = sys.argv[4:]
    fails = []
    if mode in ("print-changes", "python"):
        wav, cmd = rest[0], rest[1:]
        need(wav)
        changes = parse(run([cmd[0], wav] + cmd[1:] if mode == "print-changes" else cmd + [wav]))
        core = core_changes(speakerseg, model, wav)
        if mode == "print-changes":
            bus = [dict(c, tag=None) for c in changes if c["tag"] == "bus"]
            stream = [dict(c, tag=None) for c in changes if c["tag"] == "stream"]
            print(f"bus: {len(bus)} changes, stream: {len(stream)}, core: {len(core)}")
            if bus != stream:
                fails.append(f"bus and stream differ:\n  bus    {bus}\n  stream {stream}")
            fails += compare("bus", bus, core) + compare("stream", stream, core)
        else:
            print(f"python example: {len(changes)} changes, core: {len(core)}")
            fails += compare("python", changes, core)
    elif mode == "monitor":
        channels = dict(arg.split("=", 1) for arg in rest if "=" in arg)
        cmd = [arg for arg in rest if "=" not in arg]
        for wav in channels.values():
            need(wav)
        changes = parse(run(cmd + [f"{name}={wav}" for name, wav in channels.items()]))
        untagged = [c for c in changes if c["tag"] not in {f"[{name}]" for name in channels}]
        if untagged or not changes:
            fails.append(f"changes without a channel tag: {untagged}" if untagged else "no changes at all")
        for name, wav in channels.items():
            mine = [dict(c, tag=None) for c in changes if c["tag"] == f"[{name}]"]
            times = [c["time"] for c in mine]
            if times != sorted(times) or len(set(times)) != len(times):
                fails.append(f"{name}: changes out of order: {times}")
            chained = all(a["speaker"] == b["previous"] for a, b in zip(mine, mine[1:]))
            if not chained or (mine and mine[0]["previous"] != ""):
                fails.append(f"{name}: previous-speaker does not follow the channel's own changes")
            core = core_changes(speakerseg, model, wav)
            print(f"{name}: {len(mine)} changes, core alone on {pathlib.Path(wav).name}: {len(core)}")
            fails += compare(name, mine, core)
    else:
        sys.exit(f"unknown mode {mode}")

    for f in fails:
        print("FAIL:", f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
