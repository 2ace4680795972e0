#!/usr/bin/env python3
"""What each harder variant of the programmes (issue 37) does to the figures.

Builds the programmes of scripts/evaluation/programmes.py once per variant into OUT/VARIANT (the
same seed and readers: train and development split by person as before), each option on its
own and all together (programmes.HARD), then scores each with scripts/evaluation/evaluate.py
(identity on, --latency, the build's defaults) on train and development, and prints one table
row per variant and split (the rows are also kept in OUT/VARIANT/results.jsonl; a variant whose
results are there is not run again unless --again):

  easy       the recipe as it is (the baseline)
  channels   each turn through its own drawn channel (level, room, microphone band, codec)
  short      every turn 1.5-5 s of speech
  adjacent   no gap between turns of speech (changes inside speech)
  overlap    30 % of the boundaries between turns overlapped 0.2-0.8 s
  music      a music bed 12-20 dB under 30 % of the turns
  elsewhere  enrolment clips: first 10 s, through a drawn channel of their own
  hard       all of them
  hard-no-channels  all of them but channels: each person keeps one channel, as in easy

  .venv/bin/python3 scripts/evaluation/harder.py [--out build/programmes-hard] [--per-format 2]
                                                 [--variants easy channels ... hard] [--latency 2]
"""
import argparse
import dataclasses
import json
import pathlib
import subprocess
import sys

import programmes
from programmes import Variant

HERE = pathlib.Path(__file__).resolve().parent
VARIANTS = {
    "easy": Variant(),
    "channels": Variant(channels=True),
    "short": Variant(short=True),
    "adjacent": Variant(adjacent=True),
    "overlap": Variant(overlap=programmes.HARD.overlap),
    "music": Variant(music=programmes.HARD.music),
    "elsewhere": Variant(elsewhere=True),
    "hard": programmes.HARD,
    "hard-no-channels": dataclasses.replace(programmes.HARD, channels=False),
}
# (heading, figure): a share of seconds, or (p50, p90) seconds.
COLUMNS = [
    ("confusion", "confusion"), ("as announced", "confusion as announced"),
    ("wrong name", "wrong name"), ("as announced", "wrong name as announced"),
    ("anchor not yet known", "anchor unnamed"),
    ("as announced", "anchor unnamed as announced"),
    ("anchor recall", "anchor recall"), ("as announced", "anchor recall as announced"),
    ("anchor FA", "anchor FA"), ("as announced", "anchor FA as announced"),
    ("missed", "missed"), ("F1@0.5", "F1@0.5"),
    ("revision delay p50 / p90", ("revision delay p50", "revision delay p90")),
]


def results(args, name):
    folder = args.out / name
    done = folder / "results.jsonl"
    if done.exists() and not args.again:
        return [json.loads(line) for line in done.read_text().splitlines()]
    if not (folder / "splits.json").exists():
        programmes.build(folder, args.seed, args.per_format, VARIANTS[name])
    cmd = [sys.executable, str(HERE / "evaluate.py"), "--programmes", str(folder), "--sets",
           "programmes-train", "programmes-development", "--latency", args.latency,
           "--reidentify", "on", "--threads", str(args.threads), "--speakerseg", args.speakerseg,
           "--json"]
    print("# " + " ".join(cmd), file=sys.stderr, flush=True)
    rows = [json.loads(line) for line in
            subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()]
    for row in rows:
        row.pop("per recording", None)
    done.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def cell(row, figure):
    if isinstance(figure, tuple):
        return " / ".join(f"{row[f]:.2f}" for f in figure) + " s"
    x = row[figure]
    return "—" if x != x else f"{x:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=programmes.ROOT / "build" / "programmes-hard")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-format", type=int, default=2)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--latency", default="2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--speakerseg", default=str(programmes.ROOT / "build" / "tools" / "speakerseg"))
    ap.add_argument("--again", action="store_true", help="score again what was scored")
    args = ap.parse_args()
    print("| variant | split | programmes | audio | speech (anchors') | " +
          " | ".join(c[0] for c in COLUMNS) + " | labels / people |")
    print("|---|---|---:|---:|---:|" + "---:|" * len(COLUMNS) + "---:|")
    for name in args.variants:
        for row in results(args, name):
            split = row["set"].removeprefix("programmes-")
            print(f"| {name} | {split} | {row['recordings']} | {row['seconds']:.0f} s | "
                  f"{row['speech seconds']:.0f} s ({row['anchor seconds']:.0f} s) | " +
                  " | ".join(cell(row, figure) for _, figure in COLUMNS) +
                  f" | {row['labels']} / {row['people']} |", flush=True)


if __name__ == "__main__":
    main()
