#!/usr/bin/env python3
"""The programmes (scripts/evaluation/programmes.py) with every enrolment clip as if recorded
elsewhere.

A programme's enrolment clip comes from the same reading session as its speech, which scores the
anchor's own turns 0.88 on average (scripts/evaluation/programme_voices.py). On air an anchor is
enrolled from other recordings: issue 28's TV anchor, enrolled that way, scored 0.73-0.85 (mean
0.81) on their own turns. This copies the programmes to OUT (WAVs and RTTMs as hard links, so the
programmes themselves are untouched) and passes each enrolment clip through another recording chain,
seeded:

  mic    another microphone: 2nd-order high-pass at 180 Hz and low-pass at 5.5 kHz, a presence
         peak at 3 kHz (+4 dB). Own turns score 0.81 on average, like the TV anchor's.
  room   a reverberant room: exponentially decaying noise, RT60 0.5 s, direct-to-reverberant
         ratio 2 dB. Harsher than the TV anchor (own turns 0.72-0.74).
  room+mic  both.
  same   the chain unchanged (with --seconds: only shorter clips).

Each clip keeps its peak level. --seconds N keeps only each clip's first N seconds (issue 28's
reporter was enrolled from 6 s of his speech; the programmes' clips hold about 20 s). Use OUT
with --programmes in scripts/evaluation/evaluate.py, scripts/evaluation/programme_voices.py or
scripts/evaluation/diart_compare.py (docs/identity.md, "Enrolled from another recording"):

  .venv/bin/python3 scripts/evaluation/enrolment_mismatch.py mic /tmp/programmes-mic
  .venv/bin/python3 scripts/evaluation/evaluate.py --programmes /tmp/programmes-mic \\
      --sets programmes-train programmes-development --latency 2 --reidentify on
"""
import argparse
import os
import pathlib
import shutil

import numpy as np
import soundfile as sf
from scipy import signal

import programmes

RATE = programmes.RATE  # the programmes' and their clips' sample rate


def microphone(x, high=180, low=5500, peak_hz=3000, peak=0.6):
    """2nd-order high-pass and low-pass (Hz), and a peak at peak_hz: x + peak * its band (0.6:
    +4 dB; negative: a dip). programmes.py draws its per-turn channels' from these."""
    b, a = signal.butter(2, high / (RATE / 2), "highpass")
    x = signal.lfilter(b, a, x)
    b, a = signal.butter(2, low / (RATE / 2), "lowpass")
    x = signal.lfilter(b, a, x)
    b, a = signal.iirpeak(peak_hz / (RATE / 2), 1.5)
    return x + peak * signal.lfilter(b, a, x)


def room(x, rng, rt60=0.5, drr_db=2.0):
    t = np.arange(int(rt60 * RATE)) / RATE
    tail = rng.standard_normal(len(t)) * np.exp(-6.9 * t / rt60)
    tail[: int(0.003 * RATE)] = 0  # the first reflections after the direct sound
    tail /= np.sqrt(np.sum(tail ** 2))
    response = tail * 10 ** (-drr_db / 20)
    response[0] += 1.0
    return signal.fftconvolve(x, response)[: len(x)]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variant", choices=["same", "mic", "room", "room+mic"],
                    help="same: the recording chain unchanged (with --seconds: shorter clips)")
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--programmes", type=pathlib.Path, default=programmes.OUT)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--seconds", type=float, help="keep only each clip's first SECONDS")
    args = ap.parse_args()
    if not (args.programmes / "train" / "programmes.json").exists():
        raise SystemExit(f"no programmes in {args.programmes}: "
                         "run scripts/evaluation/programmes.py")
    rng = np.random.default_rng(args.seed)
    if args.out.exists():
        shutil.rmtree(args.out)
    shutil.copytree(args.programmes, args.out, copy_function=os.link)
    clips = sorted(args.out.glob("*/enrol/*.wav"))
    for clip in clips:
        x, rate = sf.read(clip, dtype="float64")
        assert rate == RATE, clip
        if args.seconds:
            x = x[: int(args.seconds * RATE)]
        peak = np.max(np.abs(x))
        if "room" in args.variant:
            x = room(x, rng)
        if "mic" in args.variant:
            x = microphone(x)
        x *= peak / max(np.max(np.abs(x)), 1e-9)
        clip.unlink()  # a hard link: the programmes' own clip stays as it was
        sf.write(clip, x.astype(np.float32), rate, subtype="PCM_16")
    cut = f", first {args.seconds:g} s" if args.seconds else ""
    print(f"{len(clips)} enrolment clips through '{args.variant}'{cut} in {args.out}")


if __name__ == "__main__":
    main()
