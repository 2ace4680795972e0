#!/usr/bin/env python3
"""How well the voice model tells an enrolled anchor's turns from everyone else's on the
broadcast-like programmes (scripts/programmes.py): the ceiling of identity by voice, turn by turn.

Enrols each programme's anchors or hosts from their clips as scripts/evaluate.py does, embeds
every reference turn whole (`speakerseg voiceprint`: the stream's utterance embedding; turns
shorter than one partial, 1.6 s, are left out) and scores it against each enrolled voiceprint
(cosine): the enrolled person's own turns against everyone else's. Prints, per split and format
and per split over all formats, the count, mean and extreme of each side, the share at or above
--threshold (the stream's match threshold at latency 2 s) and the equal error rate with its
threshold; then everyone else's turns by their channel (studio, remote, telephone).

  .venv/bin/python3 scripts/programme_voices.py [--splits train development] [--threshold 0.7]
                                                [--json]
"""
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
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
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


def cells(s):
    own, o = s.get("own"), s["others"]
    return [f"{own['n']}, {own['mean']:.3f}, {own['min']:.3f}" if own else "—",
            f"{o['n']}, {o['mean']:.3f}, {o['max']:.3f}",
            f"{own['at threshold']:.2f}" if own else "—",
            f"{o['at threshold']:.2f}",
            f"{s['eer'][0]:.3f} ({s['eer'][1]:.2f})" if own else "—"]


if __name__ == "__main__":
    main()
