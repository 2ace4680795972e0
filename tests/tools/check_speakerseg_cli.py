#!/usr/bin/env python3
"""End-to-end check of `speakerseg`: logits of a whole recording against ONNX Runtime, the clear
refusals (wrong sample rate, missing model), help on stdout and argument errors that point at it,
enrolment and changes on silence, and `live` channels giving a result line."""
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import wave

import numpy as np

exe, model, ref = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
manifest = dict(line.split(" ", 1) for line in (ref / "manifest.txt").read_text().splitlines())
recording = manifest["recording"]
failures = []

with tempfile.TemporaryDirectory() as tmp:
    out = pathlib.Path(tmp) / "logits.npy"
    subprocess.run([exe, "logits", "--model", model, "--input", recording, "--output", str(out),
                    "--step", "1", "--batch", "8", "--threads", "2"], check=True)
    ours, want = np.load(out), np.load(ref / "all_windows.logprobs.npy")
    if ours.shape != want.shape:
        failures.append(f"shape {ours.shape} != reference {want.shape}")
    else:
        # Held as the engine parity suite holds it (tests/common/parity.h): on every class the
        # reference gives a probability of at least 1e-4; below that float32 rounding dominates.
        checked = want >= np.log(1e-4)
        diff = float(np.abs(ours - want)[checked].max())
        every = float(np.abs(ours - want).max())
        print(f"speakerseg logits {recording}: {ours.shape[0]} windows, max |diff| {diff:.3g} "
              f"(every class: {every:.3g})")
        if diff > 1e-3:
            failures.append(f"max |diff| {diff} > 1e-3")

    def write_wav(path, samples, rate=16000):
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
            w.writeframes(np.asarray(samples, dtype="<i2").tobytes())

    wav8k = pathlib.Path(tmp) / "8k.wav"
    write_wav(wav8k, np.zeros(8000), rate=8000)
    for args, expect in (
        (["logits", "--model", model, "--input", str(wav8k), "--output", str(out)], "16000 Hz"),
        (["logits", "--model", tmp + "/missing.onnx", "--input", recording, "--output", str(out)], "cannot be opened"),
        (["logits", "--input", recording], "needs --input and --output"),
        (["frobnicate"], "unknown command"),
        (["frobnicate", "--help"], "unknown command"),
        (["help", "frobnicate"], "unknown command"),
        (["logits", "--input", recording, "--output", str(out), "--step", "0.0000625"],
         "step must be from 0.1 to 10 s"),
        (["changes", "--input", recording, "--latency", "100"], "latency must be from 0 to 60 s"),
        # A misspelt option is refused, not left silently at its default.
        (["changes", "--input", recording, "--reidentify", "--voice-treshold", "0.7"],
         "unknown option --voice-treshold"),
        (["changes", "--input", recording, "--reidentify", "--max-speakers", "0"],
         "--max-speakers must be a positive integer"),
        (["logits", "--input", recording, "--output", str(out), "--engine", "cpu", "--precision", "fp16"],
         "--precision takes fp32, bf16, fp16-emulated, bf16-emulated, tf32-emulated, "
         "fp16-emulated-fp32-sinc, bf16-emulated-fp32-sinc or tf32-emulated-fp32-sinc"),
    ) + ((  # where the CPU cannot, bf16 is refused with the reason, not run wrong
        (["logits", "--model", model, "--input", recording, "--output", str(out), "--engine", "cpu",
          "--precision", "bf16"], "precision bf16 needs a CPU with AVX-512 and AVX512_BF16"),
    ) if not any(l.startswith("flags") and " avx512_bf16" in l for l in open("/proc/cpuinfo")) else ()):
        r = subprocess.run([exe, *args], capture_output=True, text=True)
        if r.returncode == 0 or expect not in r.stderr:
            failures.append(f"{args}: exit {r.returncode}, stderr {r.stderr!r} lacks {expect!r}")
        else:
            print(f"refused as expected: {r.stderr.splitlines()[0]}")
        # An argument error is said with one line that points at the command's help, not buried
        # under the whole usage.
        if r.returncode == 2:
            command = args[0] if args[0] not in ("frobnicate", "help") else ""
            pointer = f"speakerseg: see 'speakerseg {command + ' ' if command else ''}--help'"
            if len(r.stderr.splitlines()) != 2 or r.stderr.splitlines()[1] != pointer:
                failures.append(f"{args}: stderr is not the error and {pointer!r}: {r.stderr!r}")

    # Help is asked for, not an argument error: usage on stdout, exit 0; a command's help is its
    # own part of the usage.
    for args, has, lacks in (
        (["--help"], "speakerseg changes", None),
        (["-h"], "speakerseg changes", None),
        (["help"], "speakerseg live", None),
        (["help", "enroll"], "speakerseg enroll", "speakerseg changes"),
        (["changes", "--help"], "--reidentify", "speakerseg logits"),
        (["enroll", "--input", recording, "-h"], "speakerseg enroll", "speakerseg live"),
        (["info", "--help"], "speakerseg info", "--engine"),
    ):
        r = subprocess.run([exe, *args], capture_output=True, text=True)
        if r.returncode != 0 or r.stderr or has not in r.stdout or (lacks and lacks in r.stdout):
            failures.append(f"{args}: exit {r.returncode}, stderr {r.stderr!r}, stdout has "
                            f"{has!r}: {has in r.stdout}, lacks {lacks!r}: {lacks not in r.stdout}")
        else:
            print(f"help as expected: speakerseg {' '.join(args)}: {len(r.stdout.splitlines())} lines")

    # Silence: nothing to enrol (refused, no file written), no changes (said on stderr, exit 0).
    silence = pathlib.Path(tmp) / "silence.wav"
    write_wav(silence, np.zeros(10 * 16000))
    prints = pathlib.Path(tmp) / "people.json"
    r = subprocess.run([exe, "enroll", "--model", model, "--name", "Nobody", "--input", str(silence),
                        "--voiceprints", str(prints), "--threads", "2"], capture_output=True, text=True)
    if r.returncode == 0 or f"no speech found in {silence}" not in r.stderr or prints.exists():
        failures.append(f"enroll on silence: exit {r.returncode}, {r.stderr!r}, file written: "
                        f"{prints.exists()}")
    else:
        print(f"enroll on silence refused: {r.stderr.strip()}")
    r = subprocess.run([exe, "changes", "--model", model, "--input", str(silence), "--threads", "2"],
                       capture_output=True, text=True)
    if r.returncode != 0 or r.stdout or f"no speech found in {silence}" not in r.stderr:
        failures.append(f"changes on silence: exit {r.returncode}, {r.stdout!r}, {r.stderr!r}")
    else:
        print(f"changes on silence: {r.stderr.strip()}")

    # An enrolment counts (and embeds) the clip's speech, not its silence: up to 4 s of the
    # recording's longest annotated turn between 5 s and 3 s of silence.
    with wave.open(recording) as w:
        audio = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    start, length = max(((float(f[3]), float(f[4])) for f in
                         (line.split() for line in pathlib.Path(manifest["rttm"]).read_text().splitlines())),
                        key=lambda t: t[1])
    length = min(length, 4.0)
    turn = audio[int(start * 16000):int((start + length) * 16000)]
    padded = pathlib.Path(tmp) / "padded.wav"
    write_wav(padded, np.concatenate([np.zeros(5 * 16000), turn, np.zeros(3 * 16000)]))
    r = subprocess.run([exe, "enroll", "--model", model, "--name", "Alice", "--input", str(padded),
                        "--voiceprints", str(prints), "--threads", "2"], capture_output=True, text=True)
    said = re.search(r"enrolled Alice \(([0-9.]+) s of speech(, telephone band)?\)", r.stderr)
    speech = float(said.group(1)) if said else 0.0
    enrolled = json.loads(prints.read_text())["speakers"] if prints.exists() else []
    seconds = enrolled[0]["seconds"] if len(enrolled) == 1 else None
    # The band enroll reports is the band the file keeps.
    narrowband = enrolled[0].get("narrowband") if len(enrolled) == 1 else None
    if said and narrowband is not None and (narrowband > seconds / 2) != bool(said.group(2)):
        failures.append(f"enroll said {'telephone band' if said.group(2) else 'wideband'} but "
                        f"the file holds {narrowband} of {seconds} s narrowband")
    print(f"enroll on {length:.2f} s of speech in {length + 8:.2f} s: {speech} s of speech, "
          f"{seconds} s in the file")
    if r.returncode != 0 or not 0.75 * length <= speech <= length + 0.5 or seconds is None \
            or abs(seconds - speech) > 0.01:
        failures.append(f"enroll on padded speech: exit {r.returncode}, {r.stderr!r}, {enrolled}")

    # Compressed audio is read to its end: libsndfile alone stops an MP3 where the first frame's
    # bitrate says it ends (23 s of this 30 s recording, without an error). And choosing the CPU
    # engine because there is no GPU is not news: said only with --verbose.
    mp3 = pathlib.Path(tmp) / "copy.mp3"
    subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={recording}", "!", "wavparse", "!",
                    "audioconvert", "!", "lamemp3enc", "!", "filesink", f"location={mp3}"], check=True)
    r = subprocess.run([exe, "logits", "--model", model, "--input", str(mp3), "--output", str(out),
                        "--step", "1", "--threads", "2"], capture_output=True, text=True)
    windows = np.load(out).shape[0] if r.returncode == 0 else 0
    print(f"speakerseg logits on an MP3 copy: {windows} windows (the WAV: {want.shape[0]})")
    # An MP3 without a gapless header keeps the encoder's delay and padding (under 0.2 s): at 1 s
    # steps that may add one window, never take one away.
    if not 0 <= windows - want.shape[0] <= 1:
        failures.append(f"MP3 copy: exit {r.returncode}, {windows} windows, not {want.shape[0]}: {r.stderr}")
    if "CUDA" in r.stderr:
        failures.append(f"engine choice reported without --verbose: {r.stderr!r}")


def check_live(extra, holds):
    """Runs `speakerseg live` on three channels for 13 s of real time with `extra` options (so that
    windows run and changes are announced after the 1 s warm-up) and checks its one JSON line with
    `holds`, which must be true of it."""
    name = " ".join(["live"] + extra)
    r = subprocess.run([exe, "live", "--model", model, "--engine", "cpu", "--input", recording,
                        "--channels", "3", "--seconds", "12", "--warmup", "1", "--threads", "1"]
                       + extra, capture_output=True, text=True)
    try:
        live = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"speakerseg {name}: {live}")
        if (r.returncode != 0 or live["channels"] != 3 or live["error"] or live["changes"] < 1
                or not holds(live)):
            failures.append(f"{name}: exit {r.returncode}, {live}")
    except (ValueError, IndexError, KeyError) as e:
        failures.append(f"{name}: exit {r.returncode}, no JSON line ({e}): {r.stdout!r} {r.stderr!r}")


# `live`: real-time channels through the streaming logic (the capacity benchmark's core trial).
check_live([], lambda live: True)
# `live --replay`: the host side alone, on the CPU engine's answers for the recording's windows
# computed first (one per second of it), handed out at once: none dropped.
check_live(["--replay"], lambda live: live["engine"].startswith("replay of ")
           and "computed by cpu" in live["engine"] and not live["dropped_windows"])
# `live --replay --reidentify`: identity by voice's host side too, the voice encoder's answers (the
# recording's partials) handed out at once, stitched by the worker and a helper: utterances are
# embedded, none dropped.
check_live(["--replay", "--reidentify", "--stitch-threads", "2"],
           lambda live: not live["dropped_windows"] and live["voice_utterances"] >= 1
           and live["voice_calls"] >= 1)

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
