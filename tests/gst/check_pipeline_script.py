#!/usr/bin/python3
"""pipelines/speaker-changes.py (the element in a real decoding pipeline) against `speakerseg
changes` (the core on its own): the same recording must give the same changes, and the RTTM must be
the current-speaker timeline. Also decodes a compressed, resampled, stereo copy, and refuses what
gst-launch-1.0 refuses (unknown properties, values that do not parse or are out of range) and a
recording without an audio track, each with a message and a non-zero exit; says so where a recording
holds no speech. Given the tooling's Python and scripts/servers/oip_server.py (arguments 5 and 6),
also runs engine=remote against a server slower than remote-deadline: stdout keeps its JSON lines,
the element's warning and the unanalysed stretch go to stderr, one line each."""
import json
import pathlib
import subprocess
import sys
import tempfile
import wave

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "common"))
import gst_plugins  # noqa: E402

# Decoding WAV, Ogg Vorbis and WebM, and making the Ogg and WebM copies.
gst_plugins.use_only("coreelements", "playback", "typefindfunctions", "wavparse", "audioconvert",
                     "audioresample", "ogg", "vorbis", "matroska", "vpx", "videotestsrc")

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

    # Silence: no changes is a valid result (exit 0), but is said, not left as an empty output.
    silence = pathlib.Path(tmp) / "silence.wav"
    with wave.open(str(silence), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes(b"\0\0" * 16000 * 10)
    run = subprocess.run([sys.executable, str(script), str(silence), f"model={model}", "threads=1"],
                         capture_output=True, text=True)
    if run.returncode != 0 or run.stdout or f"no speech found in {silence}" not in run.stderr:
        failures.append(f"silence: exit {run.returncode}, stdout {run.stdout!r}, stderr {run.stderr!r}")
    else:
        print(f"silence: {run.stderr.strip()}")

    # The README's enrolled example, as it is written there: Alice and Bob enrolled from one turn
    # each of sample.wav, then the script with the voiceprints. No change may carry a name that is
    # somebody else's (sample.rttm: speaker90 was enrolled as Alice, speaker91 as Bob); both names
    # must be announced.
    if manifest.get("source") == "shared" and pathlib.Path(recording).name == "sample.wav":
        prints = pathlib.Path(tmp) / "people.json"
        for name, start, end in (("Alice", "10.6", "14.4"), ("Bob", "22.0", "27.8")):
            subprocess.run([speakerseg, "enroll", "--model", model, "--name", name, "--input", recording,
                            "--start", start, "--end", end, "--voiceprints", str(prints)],
                           check=True, capture_output=True)
        run = subprocess.run([sys.executable, str(script), recording, f"model={model}",
                              f"voiceprints={prints}"], capture_output=True, text=True)
        named = [json.loads(l) for l in run.stdout.splitlines()] if run.returncode == 0 else []
        turns = [(l.split()[7], float(l.split()[3]), float(l.split()[3]) + float(l.split()[4]))
                 for l in pathlib.Path(manifest["rttm"]).read_text().splitlines()]
        enrolled_as = {"Alice": "speaker90", "Bob": "speaker91"}
        for c in named:
            who, at = enrolled_as.get(c["speaker"]), c["time"] + 0.3  # past the boundary's blur
            if who and not any(t[0] == who and t[1] <= at < t[2] for t in turns):
                failures.append(f"README example: {c['speaker']} announced at {c['time']} s, but "
                                f"{who} does not speak then: {named}")
        if {c["speaker"] for c in named} & set(enrolled_as) != set(enrolled_as):
            failures.append(f"README example: exit {run.returncode}, not both names: {named} {run.stderr}")
        print(f"README's enrolled example: {[(c['time'], c['speaker']) for c in named]}")
    else:
        print("README's enrolled example: not checked (it needs ../shared's sample.wav)")

    # Refused before anything runs, as gst-launch-1.0 refuses them; a video-only file is said to be one.
    video = pathlib.Path(tmp) / "video.webm"
    subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "num-buffers=20", "!",
                    "video/x-raw,width=64,height=48", "!", "vp8enc", "!", "webmmux", "!", "filesink",
                    f"location={video}"], check=True)
    for args, expect in (
        ([recording, "bogus=1"], "has no property 'bogus'"),
        ([recording, "threads=abc"], "threads takes a whole number"),
        ([recording, "latency=100"], "latency must be from 0 to 60"),
        ([recording, "--latency", "100"], "latency must be from 0 to 60"),
        ([recording, "step=0"], "step must be from 0.1 to 10"),
        ([recording, "mode=fast"], "mode takes one of auto, latency, throughput"),
        ([recording, "reidentify=maybe"], "reidentify takes true or false"),
        ([recording, "threads"], "NAME=VALUE"),
        ([str(video)], "has no audio track (its streams: video/x-raw)"),
    ):
        run = subprocess.run([sys.executable, str(script), *args, f"model={model}"], capture_output=True,
                             text=True)
        if run.returncode == 0 or expect not in run.stderr or run.stdout:
            failures.append(f"{args}: exit {run.returncode}, stdout {run.stdout!r}, stderr {run.stderr!r} "
                            f"lacks {expect!r}")
        else:
            print(f"refused as expected: {run.stderr.strip()}")

if len(sys.argv) > 6:
    # Every answer 3 s late, the deadline 1 s and no wait: every window goes unanalysed. The
    # checks when the element starts are not delayed.
    server = subprocess.Popen([sys.argv[5], sys.argv[6], "--delay-ms", "3000", "--models",
                               str(pathlib.Path(model).parent)], stdout=subprocess.PIPE, text=True)
    try:
        ready = server.stdout.readline()  # "ready grpc=HOST:PORT http=...", or "" if it failed
        if not ready.startswith("ready grpc="):
            sys.exit(f"FAIL: {sys.argv[6]} did not start (exit {server.wait()}): {ready!r}")
        address = ready.split()[1].partition("=")[2]
        run = subprocess.run([sys.executable, str(script), recording, "engine=remote", f"server={address}",
                              "remote-deadline=1000", "outage-wait=0"], capture_output=True, text=True)
    finally:
        server.terminate()
        server.wait()
    lines = run.stderr.splitlines()
    warned = [l for l in lines if l.startswith("speakerchange: warning: The inference engine is unavailable: ")]
    stretches = [l for l in lines if " s of stream time unanalysed (" in l]
    try:
        stdout_json = all(isinstance(json.loads(l), dict) for l in run.stdout.splitlines())
    except ValueError:
        stdout_json = False
    if (run.returncode != 0 or not stdout_json or len(warned) != 1 or not stretches
            or not all(address in l and "overloaded or stuck" in l for l in warned + stretches)
            or "no speech found in what was analysed of" not in run.stderr):
        failures.append(f"remote engine, server too slow: exit {run.returncode}, stdout {run.stdout!r}, "
                        f"stderr {run.stderr!r}")
    else:
        print(f"remote engine, server too slow, on stderr:\n  {warned[0]}\n  {stretches[-1]}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
