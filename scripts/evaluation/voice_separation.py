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

  .venv/bin/python3 scripts/evaluation/voice_separation.py [--speakerseg build/tools/speakerseg]
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
from pyannote.core import Timeline
from pyannote.database.util import load_rttm

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "pyannote-debug"
SETS = {"train": "train.rttm", "development": "development.rttm"}
PARTIAL = 1.6


def pieces(rttm, seconds):
    for rec, ann in sorted(load_rttm(str(rttm)).items()):
        for turn, _, who in ann.itertracks(yield_label=True):
            others = Timeline([seg for seg, _, w in ann.itertracks(yield_label=True) if w != who])
            for alone in Timeline([turn]).extrude(others):
                t, b = alone.start, alone.end
                while b - t >= PARTIAL:
                    u = b if b - t < seconds + PARTIAL else t + seconds
                    yield rec, who, t, u
                    t = u


def embed(speakerseg, wav, t, u, tmp):
    """The stream's utterance embedding of wav's [t, u)."""
    out = pathlib.Path(tmp) / "e.npy"
    subprocess.run([speakerseg, "voiceprint", "--input", str(wav),
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


PERSON = {True: "same person", False: "different people"}


def unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def where(a, b):
    return "one recording" if a == b else "across recordings"


def of(kinds, same):
    """Every score of the same person (same=True) or of different people, wherever."""
    return np.concatenate([v for (_, s), v in kinds.items() if s == same])


def pair_kinds(rows, X, S=None):
    """Cosine of every pair of pieces (or their score in S), by (where, same person)."""
    if S is None:
        X = unit(X)
        S = X @ X.T
    kinds = collections.defaultdict(list)
    for i, j in itertools.combinations(range(len(rows)), 2):
        kinds[(where(rows[i][0], rows[j][0]), rows[i][1] == rows[j][1])].append(float(S[i, j]))
    return {k: np.array(v) for k, v in kinds.items()}


def operating_points(rows, X, thresholds):
    """Raw cosine against fair centring at matched false accepts, per threshold."""
    recs = [r[0] for r in rows]
    others = np.array([X[[j for j in range(len(X)) if recs[j] != recs[i]]].mean(0)
                       for i in range(len(X))])
    raw, cen = pair_kinds(rows, X), pair_kinds(rows, X - others)

    def rates(k, t):
        return {"threshold": float(t),
                "missed, same person across recordings":
                    float((k[("across recordings", True)] < t).mean()),
                "missed, same person in one recording":
                    float((k[("one recording", True)] < t).mean()),
                "merged, different people of one recording":
                    int((k[("one recording", False)] >= t).sum())}
    out = []
    for t in thresholds:
        fa = float((of(raw, False) >= t).mean())
        out.append({"false accepts": fa, "raw cosine": rates(raw, t),
                    "centred": rates(cen, np.quantile(of(cen, False), 1 - fa))})
    return out


def centroid_or_nearest(rows, X, false_accepts):
    """Each piece against each (recording, person) group of the others: the group's centroid or
    its nearest piece, at matched false accepts; misses of the same person counted per trial."""
    X = unit(X)
    groups = collections.defaultdict(list)
    for i, (rec, who, _, _) in enumerate(rows):
        groups[(rec, who)].append(i)
    trials = {"centroid": collections.defaultdict(list), "nearest piece": collections.defaultdict(list)}
    for i, (rec, who, _, _) in enumerate(rows):
        for (grec, gwho), idx in groups.items():
            idx = [j for j in idx if j != i]
            if not idx:
                continue
            key = (where(grec, rec), gwho == who)
            c = X[idx].sum(0)
            trials["centroid"][key].append(float(c @ X[i] / np.linalg.norm(c)))
            trials["nearest piece"][key].append(float((X[idx] @ X[i]).max()))
    out = []
    for fa in false_accepts:
        row = {"false accepts": fa}
        for how, k in trials.items():
            t = float(np.quantile(of(k, False), 1 - fa))
            across = np.array(k[("across recordings", True)])
            row[how] = {"threshold": t, "missed across recordings": int((across < t).sum()),
                        "trials across recordings": len(across)}
        out.append(row)
    return out


def score(rows, X):
    kinds = pair_kinds(rows, X)
    out = {"eer": eer(of(kinds, True), of(kinds, False))}
    one = [kinds.get(("one recording", same), []) for same in (True, False)]
    if all(len(v) for v in one):
        out["eer one recording"] = eer(*one)
    out["pairs"] = {f"{w}, {PERSON[same]}": {"n": len(v), "mean": float(np.mean(v))}
                    for (w, same), v in sorted(kinds.items())}
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
            embs[name] = np.array([embed(args.speakerseg, DATA / f"{rec}.wav", t, u, tmp)
                                   for rec, _, t, u in rows[name]])
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
