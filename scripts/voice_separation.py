#!/usr/bin/env python3
"""How well the voice encoder tells people apart on the annotated recordings.

Cuts every stretch of ../shared/data/pyannote-debug where one person alone speaks (by the human
RTTM) into pieces of --seconds (3 s: the stream's evidence; a last piece of at least 1.6 s, one
partial, is kept), embeds each with `speakerseg voiceprint` (the stream's utterance embedding),
and scores every pair of pieces of one set by cosine: the same person or not, in one recording or
across recordings (AMI names are global: the same person in another meeting). Prints, per set,
each kind of pair's count and mean, and the equal error rate with its threshold, for the raw
cosine, after removing the train pieces' mean embedding (a fixed centring learnt on train, the
usual first step of a cosine back-end), and after removing each recording's own mean. Then, at
each of the stream's match thresholds (--thresholds), compares the raw cosine on train with train
centred fairly (each piece by the mean of the other recordings' pieces) at the threshold that
accepts as many different-people pairs: how often the same person is missed and two people of one
recording are taken for one. Last, on train, a piece against a person's other pieces of one
recording: their centroid (what a voiceprint is) against their nearest piece (exemplars), at as
many false accepts (--false-accepts).

  .venv/bin/python3 scripts/voice_separation.py [--speakerseg build/tools/speakerseg]
                                                [--seconds 3] [--thresholds 0.70 0.75]
                                                [--false-accepts 0.05 0.02] [--json]
"""
import argparse
import collections
import itertools
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "pyannote-debug"
SETS = {"train": "train.rttm", "development": "development.rttm"}
PARTIAL = 1.6


def alone(turns, who, start, end):
    """[start, end) less every turn of somebody else."""
    pieces = [(start, end)]
    for s, e, w in turns:
        if w == who:
            continue
        cut = []
        for a, b in pieces:
            if e <= a or s >= b:
                cut.append((a, b))
                continue
            if s > a:
                cut.append((a, s))
            if e < b:
                cut.append((e, b))
        pieces = cut
    return pieces


def pieces(rttm, seconds):
    turns = collections.defaultdict(list)
    for line in open(rttm):
        p = line.split()
        turns[p[1]].append((float(p[3]), float(p[3]) + float(p[4]), p[7]))
    for rec, ts in sorted(turns.items()):
        for s, e, who in ts:
            for a, b in alone(ts, who, s, e):
                t = a
                while b - t >= PARTIAL:
                    u = b if b - t < seconds + PARTIAL else t + seconds
                    yield rec, who, t, u
                    t = u


def embed(speakerseg, rec, _who, t, u, tmp):
    out = pathlib.Path(tmp) / "e.npy"
    subprocess.run([speakerseg, "voiceprint", "--input", str(DATA / f"{rec}.wav"),
                    "--start", f"{t:.3f}", "--end", f"{u:.3f}", "--output", str(out)],
                   check=True, capture_output=True)
    return np.load(out).reshape(-1)


def eer(same, diff):
    same, diff = np.asarray(same), np.asarray(diff)
    best = None
    for t in np.sort(np.concatenate([same, diff])):
        miss, fa = (same < t).mean(), (diff >= t).mean()
        if best is None or abs(miss - fa) < best[0]:
            best = (abs(miss - fa), (miss + fa) / 2, float(t))
    return best[1], best[2]


def pair_kinds(rows, X):
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = X @ X.T
    kinds = collections.defaultdict(list)
    for i, j in itertools.combinations(range(len(rows)), 2):
        where = "one recording" if rows[i][0] == rows[j][0] else "across recordings"
        kinds[(where, "same person" if rows[i][1] == rows[j][1] else "different people")].append(
            float(S[i, j]))
    return {k: np.array(v) for k, v in kinds.items()}


def operating_points(rows, X, thresholds):
    """Raw cosine against fair centring at matched false accepts, per threshold."""
    recs = [r[0] for r in rows]
    others = np.array([X[[j for j in range(len(X)) if recs[j] != recs[i]]].mean(0)
                       for i in range(len(X))])
    raw, cen = pair_kinds(rows, X), pair_kinds(rows, X - others)
    diff = lambda k: np.concatenate([v for (w, p), v in k.items() if p == "different people"])

    def rates(k, t):
        return {"threshold": float(t),
                "missed, same person across recordings":
                    float((k[("across recordings", "same person")] < t).mean()),
                "missed, same person in one recording":
                    float((k[("one recording", "same person")] < t).mean()),
                "merged, different people of one recording":
                    int((k[("one recording", "different people")] >= t).sum())}
    out = []
    for t in thresholds:
        fa = float((diff(raw) >= t).mean())
        out.append({"false accepts": fa, "raw cosine": rates(raw, t),
                    "centred": rates(cen, np.quantile(diff(cen), 1 - fa))})
    return out


def centroid_or_nearest(rows, X, false_accepts):
    """Each piece against each (recording, person) group of the others: the group's centroid or
    its nearest piece, at matched false accepts; misses of the same person counted per trial."""
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    groups = collections.defaultdict(list)
    for i, (rec, who, _, _) in enumerate(rows):
        groups[(rec, who)].append(i)
    trials = {"centroid": collections.defaultdict(list), "nearest piece": collections.defaultdict(list)}
    for i, (rec, who, _, _) in enumerate(rows):
        for (grec, gwho), idx in groups.items():
            idx = [j for j in idx if j != i]
            if not idx:
                continue
            key = ("one recording" if grec == rec else "across recordings", gwho == who)
            c = X[idx].sum(0)
            trials["centroid"][key].append(float(c @ X[i] / np.linalg.norm(c)))
            trials["nearest piece"][key].append(float((X[idx] @ X[i]).max()))
    out = []
    for fa in false_accepts:
        row = {"false accepts": fa}
        for how, k in trials.items():
            diff = np.concatenate([v for (w, same), v in k.items() if not same])
            t = float(np.quantile(diff, 1 - fa))
            across = np.array(k[("across recordings", True)])
            row[how] = {"threshold": t, "missed across recordings": int((across < t).sum()),
                        "trials across recordings": len(across)}
        out.append(row)
    return out


def score(rows, X):
    kinds = pair_kinds(rows, X)
    same = [s for k, v in kinds.items() if k[1] == "same person" for s in v]
    diff = [s for k, v in kinds.items() if k[1] == "different people" for s in v]
    out = {"eer": eer(same, diff)}
    one = [kinds.get(("one recording", p), []) for p in ("same person", "different people")]
    if all(len(v) for v in one):
        out["eer one recording"] = eer(*one)
    out["pairs"] = {f"{w}, {p}": {"n": len(v), "mean": float(np.mean(v))}
                    for (w, p), v in sorted(kinds.items())}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speakerseg", default=str(ROOT / "build" / "tools" / "speakerseg"))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.70, 0.75])
    ap.add_argument("--false-accepts", type=float, nargs="+", default=[0.05, 0.02])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows, embs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, rttm in SETS.items():
            rows[name] = list(pieces(DATA / rttm, args.seconds))
            print(f"{name}: embedding {len(rows[name])} pieces", file=sys.stderr)
            embs[name] = np.array([embed(args.speakerseg, *r, tmp) for r in rows[name]])
    centre = embs["train"].mean(axis=0)
    result = {}
    for name in SETS:
        # What a stream's running mean would approach: its own meeting's mean (recordings with
        # one piece only would be left with nothing, so they are left out of this one).
        recs = [r[0] for r in rows[name]]
        keep = [i for i, r in enumerate(recs) if recs.count(r) > 1]
        own = np.array([embs[name][i] - embs[name][[j for j in keep if recs[j] == recs[i]]].mean(0)
                        for i in keep])
        result[name] = {"pieces": len(rows[name]),
                        "seconds": sum(u - t for _, _, t, u in rows[name]),
                        "raw cosine": score(rows[name], embs[name]),
                        "train mean removed": score(rows[name], embs[name] - centre),
                        "own recording's mean removed": score([rows[name][i] for i in keep], own)}
    result["train"]["operating points"] = operating_points(rows["train"], embs["train"],
                                                           args.thresholds)
    result["train"]["centroid or nearest piece"] = centroid_or_nearest(
        rows["train"], embs["train"], args.false_accepts)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for name, r in result.items():
        print(f"{name}: {r['pieces']} pieces, {r['seconds']:.0f} s of one person alone")
        for how in ("raw cosine", "train mean removed", "own recording's mean removed"):
            s = r[how]
            line = f"  {how:28s} EER {s['eer'][0]:.3f} at {s['eer'][1]:.2f}"
            if "eer one recording" in s:
                line += (f"; within one recording {s['eer one recording'][0]:.3f} at "
                         f"{s['eer one recording'][1]:.2f}")
            print(line)
            for k, v in s["pairs"].items():
                print(f"    {k:38s} {v['n']:4d} pairs, mean {v['mean']:+.2f}")
    print("train at the stream's thresholds: raw cosine | centred by the other recordings' mean, "
          "at as many false accepts")
    for op in result["train"]["operating points"]:
        print(f"  false accepts {op['false accepts']:.3f} of different-people pairs")
        for how in ("raw cosine", "centred"):
            r = op[how]
            print(f"    {how:10s} at {r['threshold']:.2f}: missed {r['missed, same person across recordings']:.2f}"
                  f" across recordings, {r['missed, same person in one recording']:.2f} in one;"
                  f" {r['merged, different people of one recording']} pairs of one recording merged")

    print("train, a piece against a person's pieces of another recording: centroid | nearest piece")
    for row in result["train"]["centroid or nearest piece"]:
        print(f"  false accepts {row['false accepts']:.2f}: " + "; ".join(
            f"{how} at {row[how]['threshold']:.2f} misses {row[how]['missed across recordings']}"
            f" of {row[how]['trials across recordings']}" for how in ("centroid", "nearest piece")))


if __name__ == "__main__":
    main()
