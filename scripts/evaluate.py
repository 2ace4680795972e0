#!/usr/bin/env python3
"""Speaker-change accuracy on the annotated recordings of ../shared/data/pyannote-debug.

Runs `speakerseg changes` (the same streaming logic as the speakerchange element: 10 s windows
every --step, frames final --latency behind the newest audio) on every recording, and scores the
current-speaker timeline it announces against the human RTTM with pyannote.metrics:

  purity, coverage   SegmentationPurity / SegmentationCoverage, tolerance 0.5 s
  P, R, F1 @0.25/0.5 SegmentationPrecision / SegmentationRecall with that tolerance (boundaries are
                     segment ends, as pyannote.metrics defines them), F1 = 2PR / (P + R)
  delay mean / p95   seconds between a change and its announcement (changes announced before the
                     end of the file; at the end the rest is finalised at once)

Each metric is accumulated over the recordings of a set (pyannote.metrics' abs(metric)).

  .venv/bin/python3 scripts/evaluate.py [--sets train development sample] [--latency 1 2 5 offline]
                                        [--step 1] [--min-speech S] [--min-silence S] [--onset X]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
from pyannote.core import Annotation, Segment
from pyannote.database.util import load_rttm, load_uem
from pyannote.metrics.segmentation import (SegmentationCoverage, SegmentationPrecision,
                                           SegmentationPurity, SegmentationRecall)

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "pyannote-debug"
SETS = {"train": "train", "development": "development", "sample": "sample"}


def run_changes(args, wav, latency, tmp):
    rttm = pathlib.Path(tmp) / (wav.stem + ".rttm")
    cmd = [str(args.speakerseg), "changes", "--model", args.model, "--input", str(wav), "--rttm", str(rttm),
           "--step", str(args.step), "--threads", str(args.threads)]
    cmd += ["--offline"] if latency == "offline" else ["--latency", str(latency)]
    for opt in ("min_speech", "min_silence", "onset", "match_threshold", "switch_margin"):
        if getattr(args, opt) is not None:
            cmd += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    changes = [json.loads(line) for line in out.splitlines() if line.strip()]
    hyp = Annotation(uri=wav.stem)
    for line in rttm.read_text().splitlines():
        f = line.split()
        hyp[Segment(float(f[3]), float(f[3]) + float(f[4]))] = f[7]
    return hyp, changes, cmd


def evaluate(args, set_name, latency):
    refs = load_rttm(str(DATA / f"{SETS[set_name]}.rttm"))
    uem_file = DATA / f"{SETS[set_name]}.uem"
    uems = load_uem(str(uem_file)) if uem_file.exists() else {}
    metrics = {
        "purity": SegmentationPurity(tolerance=0.5),
        "coverage": SegmentationCoverage(tolerance=0.5),
        "p25": SegmentationPrecision(tolerance=0.25), "r25": SegmentationRecall(tolerance=0.25),
        "p50": SegmentationPrecision(tolerance=0.5), "r50": SegmentationRecall(tolerance=0.5),
    }
    delays = []
    with tempfile.TemporaryDirectory() as tmp:
        for uri in sorted(refs):
            wav = DATA / f"{uri}.wav"
            hyp, changes, cmd = run_changes(args, wav, latency, tmp)
            uem = uems.get(uri)
            for name, m in metrics.items():
                m(refs[uri], hyp, uem=uem) if name in ("purity", "coverage") else m(refs[uri], hyp)
            end = max((c["time"] + c["delay"] for c in changes), default=0)
            delays += [c["delay"] for c in changes if c["time"] + c["delay"] < end - 0.01]
    f1 = lambda p, r: 2 * p * r / (p + r) if p + r > 0 else 0.0
    v = {k: abs(m) for k, m in metrics.items()}
    return {
        "set": set_name, "latency": latency, "purity": v["purity"], "coverage": v["coverage"],
        "P@0.25": v["p25"], "R@0.25": v["r25"], "F1@0.25": f1(v["p25"], v["r25"]),
        "P@0.5": v["p50"], "R@0.5": v["r50"], "F1@0.5": f1(v["p50"], v["r50"]),
        "delay mean": float(np.mean(delays)) if delays else float("nan"),
        "delay p95": float(np.percentile(delays, 95)) if delays else float("nan"),
        "changes": len(delays),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["train", "development", "sample"], choices=list(SETS))
    ap.add_argument("--latency", nargs="+", default=["1", "2", "5", "offline"])
    ap.add_argument("--step", type=float, default=1.0)
    ap.add_argument("--min-speech", dest="min_speech", type=float)
    ap.add_argument("--min-silence", dest="min_silence", type=float)
    ap.add_argument("--onset", type=float)
    ap.add_argument("--match-threshold", dest="match_threshold", type=float)
    ap.add_argument("--switch-margin", dest="switch_margin", type=float)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=str(ROOT / "models" / "segmentation-3.0.onnx"))
    ap.add_argument("--speakerseg", default=str(ROOT / "build" / "tools" / "speakerseg"))
    ap.add_argument("--json", action="store_true", help="one JSON object per row instead of a table")
    args = ap.parse_args()

    cols = ["purity", "coverage", "P@0.25", "R@0.25", "F1@0.25", "P@0.5", "R@0.5", "F1@0.5", "delay mean", "delay p95"]
    if not args.json:
        print(f"# command: .venv/bin/python3 scripts/evaluate.py {' '.join(sys.argv[1:])}\n")
        print("| set | latency | " + " | ".join(cols) + " |")
        print("|---|---|" + "---:|" * len(cols))
    for set_name in args.sets:
        for latency in args.latency:
            row = evaluate(args, set_name, latency)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                lat = "offline" if latency == "offline" else f"{float(latency):g} s"
                print(f"| {set_name} | {lat} | " + " | ".join(
                    f"{row[c]:.2f}" if not c.startswith("delay") else
                    ("—" if np.isnan(row[c]) else f"{row[c]:.2f} s") for c in cols) + " |", flush=True)


if __name__ == "__main__":
    main()
