#!/usr/bin/python3
"""pipelines/speaker-changes.py (the element in a real decoding pipeline) against `speakerseg
changes` (the core on its own): the same recording must give the same changes, and the RTTM must
be the current-speaker timeline. Also decodes a compressed, resampled, stereo copy."""
import json
import pathlib
import subprocess
import sys
import tempfile

root, speakerseg, model, ref = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4])
manifest = dict(line.split(" ", 1) for line in (ref / "manifest.txt").read_text().splitlines())
recording = manifest["recording"]
script = root / "pipelines" / "speaker-changes.py"
failures = []

core = [json.loads(l) for l in subprocess.run(
    [speakerseg, "changes", "--model", model, "--input", recording, "--threads", "1"],
    check=True, capture_output=True, text=True).stdout.splitlines()]
with tempfile.TemporaryDirectory() as tmp:
    rttm = pathlib.Path(tmp) / "out.rttm"
    run = subprocess.run([sys.executable, str(script), recording, "--rttm", str(rttm), f"model={model}", "threads=1"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"FAIL: {script} exited {run.returncode}: {run.stderr}")
    element = [json.loads(l) for l in run.stdout.splitlines()]
    print(f"core: {len(core)} changes, element: {len(element)} changes")
    if [(c["speaker"], c["previous"]) for c in core] != [(c["speaker"], c["previous"]) for c in element]:
        failures.append(f"speakers differ:\n core    {core}\n element {element}")
    elif any(abs(a["time"] - b["time"]) > 0.002 for a, b in zip(core, element)):
        failures.append(f"times differ:\n core    {core}\n element {element}")
    segments = [l.split() for l in rttm.read_text().splitlines()]
    want = [c for c in element if c["speaker"]]
    if len(segments) != len(want) or any(abs(float(s[3]) - c["time"]) > 0.002 or s[7] != c["speaker"]
                                         for s, c in zip(segments, want)):
        failures.append(f"RTTM does not follow the changes: {segments}")

    # Any media GStreamer decodes: Ogg Vorbis, 44.1 kHz, stereo.
    ogg = pathlib.Path(tmp) / "copy.ogg"
    subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={recording}", "!", "decodebin", "!",
                    "audioconvert", "!", "audioresample", "!", "audio/x-raw,rate=44100,channels=2", "!",
                    "vorbisenc", "!", "oggmux", "!", "filesink", f"location={ogg}"], check=True)
    run = subprocess.run([sys.executable, str(script), str(ogg), f"model={model}", "threads=1"],
                         capture_output=True, text=True)
    decoded = [json.loads(l) for l in run.stdout.splitlines()] if run.returncode == 0 else []
    print(f"ogg/vorbis 44.1 kHz stereo copy: {len(decoded)} changes")
    near = sum(any(abs(d["time"] - c["time"]) <= 0.5 for d in decoded) for c in core)
    if run.returncode != 0 or near < len(core) - 1:
        failures.append(f"compressed copy: exit {run.returncode}, {near}/{len(core)} changes found: {run.stderr}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
