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

With --wrong-names, instead: each variant's seconds of speech shown under an enrolled name that
is not the speaker's, by the codec of the turn (its drawn channel's, else its person's) and of
the enrolment clip (its drawn channel's, else "as built"), revised and as announced.

  .venv/bin/python3 scripts/evaluation/harder.py [--out build/programmes-hard] [--per-format 2]
                                                 [--variants easy channels ... hard] [--latency 2]
                                                 [--wrong-names]
"""
import argparse
import collections
import dataclasses
import json
import pathlib
import subprocess
import sys
import tempfile
import types

from pyannote.core import Segment

import evaluate
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


def wrong_names(args, name):
    """{(split, "revised" | "announced", turn codec, enrolment codec): seconds} of speech under
    an enrolled name not the speaker's, turn by turn, in the variant's programmes."""
    run = types.SimpleNamespace(speakerseg=args.speakerseg, model=str(
        programmes.ROOT / "models" / "segmentation-3.0.onnx"), step=1.0, threads=args.threads,
        **{o: None for o in ("min_speech", "min_silence", "min_gap", "onset", "match_threshold",
                             "switch_margin", "max_speakers") + evaluate.IDENTITY_OPTIONS})
    out = collections.Counter()
    for split in ("train", "development"):
        folder = args.out / name / split
        for uri in json.loads((folder / "programmes.json").read_text()):
            m = json.loads((folder / f"{uri}.json").read_text())
            if "turns" not in m:
                raise SystemExit(f"harder: {name} lists no turns (only the variants do)")
            people = {p["reader"]: p for p in m["people"]}
            enrolled = {r: p["enrolment"] for r, p in people.items() if p["enrolment"]}
            with tempfile.TemporaryDirectory() as tmp:
                prints = evaluate.enrol(run, [(r, folder / e["wav"]) for r, e in enrolled.items()],
                                        uri, tmp)
                hyp, changes, _, _ = evaluate.run_changes(run, folder / m["wav"], args.latency,
                                                          "on", "fp32", tmp, prints)
            shown = {"revised": hyp, "announced": evaluate.as_announced(changes, hyp)}
            for t in m["turns"]:
                codec = (t["channel"] or people[t["reader"]]["channel"])["kind"]
                for r, e in enrolled.items():
                    for when, h in shown.items():
                        if r != t["reader"] and r in h.labels():
                            out[(split, when, codec, e.get("channel", {}).get("kind", "as built"))] \
                                += h.label_timeline(r).crop(Segment(t["start"], t["end"]),
                                                            mode="intersection").duration()
    return out


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
    ap.add_argument("--wrong-names", action="store_true",
                    help="wrong names by the turn's and the enrolment's codec instead")
    args = ap.parse_args()
    if args.wrong_names:
        print("| variant | split | turn's codec | enrolment's codec | under a wrong name, revised "
              "| as announced |\n|---|---|---|---|---:|---:|")
        for name in args.variants:
            seconds = wrong_names(args, name)
            for key in sorted({k[:1] + k[2:] for k in seconds}):
                split, codec, enrolment = key
                print(f"| {name} | {split} | {codec} | {enrolment} | " + " | ".join(
                    f"{seconds[(split, when, codec, enrolment)]:.1f} s"
                    for when in ("revised", "announced")) + " |")
        return
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
