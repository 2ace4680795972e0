#!/usr/bin/env python3
"""How well the voice model tells an enrolled anchor's turns from everyone else's on the
broadcast-like programmes (scripts/evaluation/programmes.py): the ceiling of identity by voice, turn
by turn.

Enrols each programme's anchors or hosts from their clips as scripts/evaluation/evaluate.py does,
embeds every reference turn whole (`speakerseg voiceprint`: the stream's utterance embedding; turns
shorter than one partial, 1.6 s, are left out) and scores it against each enrolled voiceprint
(cosine): the enrolled person's own turns against everyone else's. Prints, per split and format and
per split over all formats, the count, mean and extreme of each side, the share at or above
--threshold (the stream's match threshold at latency 2 s) and the equal error rate with its
threshold; then everyone else's turns by their channel (studio, remote, telephone).

With --pairs instead: the first --seconds (3) of every embeddable turn against every other turn
of its programme, by the two turns' channels: the same person's and different people's cosines
(count, mean, 5th and 95th percentile), which is how far apart the channel keeps people.

  .venv/bin/python3 scripts/evaluation/programme_voices.py [--splits train development]
                                                           [--threshold 0.7]
                                                           [--pairs [--seconds 3]] [--json]
"""
import itertools
import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np

import evaluate
from voice_separation import PARTIAL, eer, embed


def scores(args, split, tmp):
    """One row per embeddable turn and enrolled person: format, own turn or not, the turn's
    channel, cosine."""
    folder = pathlib.Path(args.programmes) / split
    rows = []
    for wav, ref, _, enrolled in evaluate.programme_recordings(folder):
        manifest = json.loads((folder / f"{wav.stem}.json").read_text())
        kind = {p["reader"]: p["channel"]["kind"] for p in manifest["people"]}
        prints = json.loads(evaluate.enrol(args, enrolled, wav.stem, tmp).read_text())["speakers"]
        print(f"{wav.stem}: embedding {len(ref)} turns", file=sys.stderr)
        for turn, _, who in ref.itertracks(yield_label=True):
            if turn.duration < PARTIAL:
                continue
            e = embed(args.speakerseg, wav, turn.start, turn.end, tmp)
            rows += [{"format": manifest["format"], "own": who == p["name"], "channel": kind[who],
                      "cosine": float(e @ np.array(p["embedding"]))} for p in prints]
    return rows


def pairs(args, split, tmp):
    """Cosines of turn pairs within each programme, keyed by channel pair and same person or not."""
    folder = pathlib.Path(args.programmes) / split
    out = {}
    for wav, ref, _, _ in evaluate.programme_recordings(folder):
        manifest = json.loads((folder / f"{wav.stem}.json").read_text())
        kind = {p["reader"]: p["channel"]["kind"] for p in manifest["people"]}
        print(f"{wav.stem}: embedding {len(ref)} turns", file=sys.stderr)
        turns = [(who, kind[who], embed(args.speakerseg, wav, t.start,
                                        min(t.end, t.start + args.seconds), tmp))
                 for t, _, who in ref.itertracks(yield_label=True) if t.duration >= PARTIAL]
        for (w1, k1, e1), (w2, k2, e2) in itertools.combinations(turns, 2):
            key = ("-".join(sorted([k1, k2])), "same" if w1 == w2 else "different")
            out.setdefault(key, []).append(float(e1 @ e2))
    return out


def summary(rows, threshold):
    own = np.array([r["cosine"] for r in rows if r["own"]])
    others = np.array([r["cosine"] for r in rows if not r["own"]])
    out = {"others": {"n": len(others), "mean": float(others.mean()), "max": float(others.max()),
                      "at threshold": float((others >= threshold).mean())}}
    if len(own):
        out["own"] = {"n": len(own), "mean": float(own.mean()), "min": float(own.min()),
                      "at threshold": float((own >= threshold).mean())}
        out["eer"] = eer(own, others)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", nargs="+", default=["train", "development"])
    ap.add_argument("--threshold", type=float, default=0.70)
    ap.add_argument("--programmes", default=str(evaluate.programmes.OUT))
    ap.add_argument("--model", default=str(evaluate.ROOT / "models" / "segmentation-3.0.onnx"))
    ap.add_argument("--speakerseg", default=str(evaluate.ROOT / "build" / "tools" / "speakerseg"))
    ap.add_argument("--pairs", action="store_true", help="turn against turn, by channel")
    ap.add_argument("--seconds", type=float, default=3.0, help="with --pairs: of each turn")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.pairs:
        return print_pairs(args)
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for split in args.splits:
            rows = scores(args, split, tmp)
            groups = {f: [r for r in rows if r["format"] == f] for f in evaluate.programmes.FORMATS}
            groups["all"] = rows
            groups.update({f"others on {k}": [r for r in rows if r["channel"] == k and not r["own"]]
                           for k in ("studio", "remote", "telephone")})
            result[split] = {g: summary(rs, args.threshold) for g, rs in groups.items() if rs}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"| split | turns | own: n, mean, min | others: n, mean, max | own >= {args.threshold:g} "
          f"| others >= {args.threshold:g} | EER (threshold) |")
    print("|---|---|---|---|---:|---:|---|")
    for split, groups in result.items():
        for g, s in groups.items():
            print(f"| {split} | {g} | " + " | ".join(cells(s)) + " |")


def print_pairs(args):
    with tempfile.TemporaryDirectory() as tmp:
        result = {split: pairs(args, split, tmp) for split in args.splits}
    stats = lambda x: (f"{len(x)}, {np.mean(x):.3f}, {np.percentile(x, 5):.3f}, "
                       f"{np.percentile(x, 95):.3f}") if x else "—"
    if args.json:
        print(json.dumps({s: {f"{k[0]} {k[1]}": v for k, v in r.items()}
                          for s, r in result.items()}))
        return
    print("| split | channels | same person: n, mean, p5, p95 | different: n, mean, p5, p95 |")
    print("|---|---|---|---|")
    for split, r in result.items():
        for ch in sorted({k[0] for k in r}):
            print(f"| {split} | {ch} | {stats(r.get((ch, 'same'), []))} | "
                  f"{stats(r.get((ch, 'different'), []))} |")


def cells(s):
    own, o = s.get("own"), s["others"]
    return [f"{own['n']}, {own['mean']:.3f}, {own['min']:.3f}" if own else "—",
            f"{o['n']}, {o['mean']:.3f}, {o['max']:.3f}",
            f"{own['at threshold']:.2f}" if own else "—",
            f"{o['at threshold']:.2f}",
            f"{s['eer'][0]:.3f} ({s['eer'][1]:.2f})" if own else "—"]


if __name__ == "__main__":
    main()
