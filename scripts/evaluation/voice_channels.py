#!/usr/bin/env python3
"""Ways to make the voice evidence robust to channels, tried on the harder programmes (issue 37).

Scores pairs of utterance embeddings within each programme of --programmes (a build of
programmes.py's harder variants; default the `hard` preset: each turn through a channel of its
own, enrolment clips from another recording): "turn-turn", two turns (of 1.7 s or more), the same
person or not; "enrolment-turn", an enrolled person's clip against the programme's turns. The
figure is the equal error rate (EER) over a split's pairs. Parts (all by default, in this order):

  equalise  front-end channel equalisation: each utterance's long-term average log-mel spectrum
            (frames within 30 dB of its loudest) moved to a reference, the mean of train's turns:
            clamped to +-10 dB, a smooth fit (4 DCT terms, clamped to +-20 dB), or unclamped.
  band      band-matched enrolment: turns against the enrolment clip as it is and against it
            sent through the telephone band (programmes.telephone), split by whether the turn
            went through the telephone; clips recorded through the telephone are left out.
  backend   a within-class covariance (WCCN) back-end: the train split's people (splits.json),
            their speech cut into pieces of 2-6 s, each piece clean and through --draws channels
            drawn as the programmes draw them (programmes.drawn_channel / through; seeded by
            --seed); the within-person covariance of their embeddings, shrunk towards its mean
            variance by --shrink, whitens every embedding (after removing their mean). Learnt on
            all pieces and on the clean ones only; scored on the programmes' splits and on the
            AMI crops of ../shared/data/pyannote-debug (voice_separation.pieces(), 3 s pieces,
            pairs across recordings: AMI names are global).
  centroid  an enrolment clip against the mean of k of a person's turns in the programme (k 1-3;
            5 draws of k turns per person, random.Random(1)): EER, and the share of own and of
            others' means at or above a few thresholds (recall / false accepts).
  snorm     symmetric score normalisation (S-norm, and adaptive AS-norm on each side's 100 best
            cohort scores): each cosine centred and scaled by both sides' scores against a cohort
            of voices nobody scored is: backend's train pieces, clean only or through channels;
            on AMI also the other AMI set's pieces (the cohort a meeting deployment would have).
  bandlimit every utterance (turns, enrolment clips, AMI pieces) restricted to a common band
            before the encoder (--bands): "mask LO-HI", the mel bins whose centre lies outside
            LO-HI Hz zeroed; "soft LO-HI", those bins scaled by 1e-3; "lowpass LO-HI", the audio
            itself through a Butterworth filter (order 8, forwards and backwards) before the mel.

The embedding is computed here in numpy, librosa and ONNX Runtime (models/voice-encoder-ge2e.onnx),
mirroring the product's C++ (core/features/mel_spectrogram, core/identity/utterance_embedding):
volume raised to -30 dBFS (only up, at most +40 dB), a power mel spectrogram (16 kHz, n_fft 400,
hop 160, 40 slaney mels, frames centred with zero padding), partials of 160 frames every 80, the
mean of their embeddings renormalised. Nothing in the product changes: this is a report
(docs/identity.md, "Channel-robust voice evidence").

  .venv/bin/python3 scripts/evaluation/voice_channels.py [equalise] [band] [backend] [centroid] [snorm]
      [bandlimit] [--programmes build/programmes-hard/hard] [--seed 7] [--draws 3] [--shrink 0.3]
      [--bands mask 0-3400 ...]
"""
import argparse
import collections
import functools
import itertools
import json
import pathlib
import random
import tempfile

import librosa
import numpy as np
import onnxruntime
import scipy.signal
import soundfile
from pyannote.database.util import load_rttm

import programmes as P
from diart_compare import raise_volume
import voice_separation as VS

MODEL = P.ROOT / "models" / "voice-encoder-ge2e.onnx"
MEL = librosa.filters.mel(sr=P.RATE, n_fft=400, n_mels=40)
CENTRES = librosa.mel_frequencies(n_mels=42, fmin=0, fmax=P.RATE / 2)[1:-1]   # Hz, MEL's bins
BANDS = ("none", "mask 0-3400", "mask 0-4000", "mask 0-5000", "mask 0-6000", "mask 300-3400",
         "soft 0-3400", "soft 0-4000", "soft 0-5000", "soft 0-6000", "soft 300-3400",
         "lowpass 0-3400", "lowpass 0-4000", "lowpass 0-5000", "lowpass 0-6000",
         "lowpass 300-3400")
PARTIAL, STEP = 160, 80
SHORTEST = 1.7              # s: a turn shorter than this is not scored (one partial is 1.59 s)
KINDS = ("turn-turn", "enrolment-turn")
SPLITS = ("train", "development")
THRESHOLDS = (0.66, 0.70, 0.74, 0.78)


@functools.lru_cache(maxsize=None)
def encoder():
    return onnxruntime.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])


def mel(x):
    """The power mel spectrogram [frames][40] of x raised to -30 dBFS (up only, at most 40 dB)."""
    x = raise_volume(np.asarray(x, dtype=np.float32))
    S = np.abs(librosa.stft(x, n_fft=400, hop_length=160, center=True, pad_mode="constant")) ** 2
    return (MEL @ S).T.astype(np.float32)


def embed(m):
    """The utterance embedding of a mel spectrogram: mean of its partials' embeddings, unit."""
    parts = np.stack([m[s:s + PARTIAL] for s in range(0, len(m) - PARTIAL + 1, STEP)])
    e = encoder().run(None, {"mel": parts})[0].mean(0)
    return e / np.linalg.norm(e)


def items_of(split):
    """(programme, reader, 'turn' or 'enrolment', channel, audio) of every turn of SHORTEST or
    more and every enrolment clip of the split's programmes (turns: the manifest's, or where it
    lists none, as a build with no variant on does, the reference's segments)."""
    out = []
    for uri in json.loads((split / "programmes.json").read_text()):
        d = json.loads((split / f"{uri}.json").read_text())
        y, _ = soundfile.read(split / d["wav"], dtype="float32")
        if "turns" not in d:   # no variant on (easy): the reference segments, the person's channel
            channel = {p["reader"]: p["channel"] for p in d["people"]}
            d["turns"] = [{"reader": r, "start": seg.start, "end": seg.end, "channel": channel[r]}
                          for seg, _, r in load_rttm(str(split / d["rttm"]))[uri].itertracks(
                              yield_label=True)]
        for t in d["turns"]:
            a = y[round(t["start"] * P.RATE):round(t["end"] * P.RATE)]
            if len(a) >= SHORTEST * P.RATE:
                out.append((uri, t["reader"], "turn", t["channel"], a))
        for p in d["people"]:
            if p["enrolment"]:
                a, _ = soundfile.read(split / p["enrolment"]["wav"], dtype="float32")
                out.append((uri, p["reader"], "enrolment", p["enrolment"].get("channel"), a))
    return out


def pairs(items, X, S=None):
    """Cosines (or scores S[i][j]) of the pairs within a programme: {(kind, same person): [score]}."""
    out = collections.defaultdict(list)
    for i, j in itertools.combinations(range(len(items)), 2):
        a, b = items[i], items[j]
        if a[0] == b[0] and "turn" in (a[2], b[2]):
            out[(KINDS[a[2] != b[2]], a[1] == b[1])].append(
                float(X[i] @ X[j] if S is None else S[i, j]))
    return out


def eers(items, X, S=None):
    k = pairs(items, X, S)
    return [VS.eer(k[(kind, True)], k[(kind, False)])[0] for kind in KINDS]


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
    for row in rows:
        print("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row)
              + " |")
    print()


def describe(data):
    """What the pairs rest on, per split."""
    for s, items in data.items():
        k = pairs(items, np.zeros((len(items), 1)))
        print(f"{s}: {len({i[0] for i in items})} programmes, "
              f"{sum(i[2] == 'turn' for i in items)} turns of {len({i[1] for i in items})} people, "
              f"{sum(i[2] == 'enrolment' for i in items)} enrolment clips; pairs same/different: "
              + ", ".join(f"{kind} {len(k[(kind, True)])}/{len(k[(kind, False)])}"
                          for kind in KINDS))
    print()


def ltas(m):
    """Long-term average log-mel spectrum (dB) of the frames within 30 dB of the loudest."""
    e = m.sum(1)
    return 10 * np.log10(m[e > e.max() * 1e-3].mean(0) + 1e-10)


DCT = np.cos(np.pi * np.outer(np.arange(40) + 0.5, np.arange(4)) / 40)


def equalised(m, ref, how):
    g = ref - ltas(m)
    if how == "clamped +-10 dB":
        g = np.clip(g, -10, 10)
    elif how == "smooth (4 DCT terms)":
        g = np.clip(DCT @ np.linalg.lstsq(DCT, g, rcond=None)[0], -20, 20)
    return m * (10 ** (g / 10)).astype(np.float32)


def equalise(data, args):
    mels = {s: [mel(i[4]) for i in items] for s, items in data.items()}
    ref = np.mean([ltas(m) for m, i in zip(mels["train"], data["train"]) if i[2] == "turn"], 0)
    rows = []
    for how in ("none", "clamped +-10 dB", "smooth (4 DCT terms)", "unclamped"):
        row = [how]
        for s, items in data.items():
            row += eers(items, np.stack([embed(m if how == "none" else equalised(m, ref, how))
                                         for m in mels[s]]))
        rows.append(row)
    table(["equalisation"] + [f"{s} {k} EER" for s in data for k in KINDS], rows)


def band(data, args):
    rows = []
    for s, items in data.items():
        enrol = {(i[0], i[1]): (embed(mel(i[4])), embed(mel(P.telephone(i[4]))))
                 for i in items if i[2] == "enrolment"
                 and (i[3] or {}).get("kind") != "telephone"}
        scores = collections.defaultdict(list)
        for uri, reader, kind, c, a in items:
            if kind != "turn":
                continue
            e, narrow = embed(mel(a)), c.get("kind") == "telephone"
            for (u, r), clips in enrol.items():
                if u == uri:
                    for clip, v in zip(("as recorded", "telephone band"), clips):
                        scores[(narrow, clip, r == reader)].append(float(e @ v))
        for narrow, clip in itertools.product((True, False), ("as recorded", "telephone band")):
            own, others = scores[(narrow, clip, True)], scores[(narrow, clip, False)]
            rows.append([s, "telephone" if narrow else "other", clip, f"{len(own)}/{len(others)}",
                         float(np.mean(own)), float(np.mean(others)), VS.eer(own, others)[0]])
    print("enrolment clips scored: those not through the telephone")
    table(["split", "turns", "enrolment", "pairs own/others", "mean own", "mean others", "EER"],
          rows)


def training_pieces(programmes, seed, draws):
    """(reader, channel kind, embedding) of the train split's people's speech cut into pieces of
    2-6 s, each piece clean and through `draws` drawn channels."""
    pool = {r.id: r for r in P.readers()}
    split = json.loads((programmes / "splits.json").read_text())["train"]
    rng, out = np.random.default_rng(seed), []
    with tempfile.TemporaryDirectory() as tmp:
        for r in [pool[i] for kind in ("chapter", "one") for i in split[kind]["readers"]]:
            x, t = np.concatenate([P.audio(u) for u in r.utterances]), 0
            while t + 2 * P.RATE <= len(x):
                n = int(rng.uniform(2, 6) * P.RATE)
                piece, t = x[t:t + n], t + n
                if len(piece) < SHORTEST * P.RATE:
                    break
                out.append((r.id, "clean", embed(mel(piece))))
                for _ in range(draws):
                    c = P.drawn_channel(rng)
                    y = P.through(piece * 10 ** (c["gain_db"] / 20), c, tmp)
                    out.append((r.id, c["kind"], embed(mel(y))))
    return out


def wccn(X, labels, shrink):
    """(mean, W): unit((x - mean) @ W.T) whitens the within-person covariance, shrunk."""
    mu = X.mean(0)
    Z = X - mu
    Sw = np.zeros((len(mu), len(mu)))
    for person in set(labels):
        D = Z[labels == person] - Z[labels == person].mean(0)
        Sw += D.T @ D
    Sw /= len(Z)
    Sw = (1 - shrink) * Sw + shrink * np.eye(len(mu)) * np.trace(Sw) / len(mu)
    w, V = np.linalg.eigh(Sw)
    return mu, V @ np.diag(1 / np.sqrt(w)) @ V.T


def ami_pieces(seconds, embedding=lambda a: embed(mel(a))):
    """{set: (rows, embeddings)} of voice_separation's pieces of the AMI crops (each piece's
    audio to its embedding by `embedding`)."""
    out = {}
    for s, rttm in VS.SETS.items():
        rows = list(VS.pieces(VS.DATA / rttm, seconds))
        out[s] = rows, np.stack([embedding(soundfile.read(
            VS.DATA / f"{rec}.wav", dtype="float32", start=round(t * P.RATE),
            stop=round(u * P.RATE))[0]) for rec, _, t, u in rows])
    return out


def across(rows, X, S=None):
    k = VS.pair_kinds(rows, X, S)
    same, diff = k.get(("across recordings", True), []), k.get(("across recordings", False), [])
    return VS.eer(same, diff)[0], f"{len(same)}/{len(diff)}"


def backend(data, args):
    pieces = training_pieces(args.programmes, args.seed, args.draws)
    labels = np.array([p[0] for p in pieces])
    X = np.stack([p[2] for p in pieces])
    clean = labels[[p[1] == "clean" for p in pieces]]
    print(f"back-end data: {len(pieces)} embeddings ({len(clean)} clean pieces, each through "
          f"{args.draws} channels: " + ", ".join(
              f"{k} {v}" for k, v in sorted(collections.Counter(
                  p[1] for p in pieces if p[1] != "clean").items()))
          + f") of {len(set(labels))} people; shrink {args.shrink}\n")
    backs = {"none": None, "WCCN, pieces through channels": wccn(X, labels, args.shrink),
             "WCCN, clean pieces only": wccn(X[[p[1] == "clean" for p in pieces]], clean,
                                             args.shrink)}
    emb = {s: np.stack([embed(mel(i[4])) for i in items]) for s, items in data.items()}
    ami = ami_pieces(args.ami_seconds)
    rows = []
    for name, b in backs.items():
        apply = (lambda E: E) if b is None else (lambda E, b=b: VS.unit((E - b[0]) @ b[1].T))
        row = [name]
        for s, items in data.items():
            row += eers(items, apply(emb[s]))
        for s, (r, E) in ami.items():
            row += across(r, apply(E))
        rows.append(row)
    table(["back-end"] + [f"{s} {k} EER" for s in data for k in KINDS]
          + [h for s in ami for h in (f"AMI {s} EER", f"AMI {s} pairs same/different")],
          rows)


def centroid(data, args):
    rng, rows = random.Random(1), []
    for s, items in data.items():
        X = np.stack([embed(mel(i[4])) for i in items])
        for k in (1, 2, 3):
            scores = {True: [], False: []}
            for uri in sorted({i[0] for i in items}):
                idx = [j for j, i in enumerate(items) if i[0] == uri]
                enrol = {items[j][1]: X[j] for j in idx if items[j][2] == "enrolment"}
                turns = collections.defaultdict(list)
                for j in idx:
                    if items[j][2] == "turn":
                        turns[items[j][1]].append(j)
                for r, t in turns.items():
                    for _ in range(5 if len(t) >= k else 0):
                        c = X[rng.sample(t, k)].mean(0)
                        for er, e in enrol.items():
                            scores[er == r].append(float(c @ e / np.linalg.norm(c)))
            own, others = np.array(scores[True]), np.array(scores[False])
            rows.append([s, k, f"{len(own)}/{len(others)}", VS.eer(own, others)[0]]
                        + [f"{(own >= t).mean():.2f} / {(others >= t).mean():.3f}"
                           for t in THRESHOLDS])
    table(["split", "k turns", "trials own/others", "EER"]
          + [f"at {t:.2f}: own / others" for t in THRESHOLDS], rows)


def snormed(X, cohort, top):
    """Symmetric score normalisation of X's cosines against a cohort: each side's score centred
    and scaled by its own scores against the cohort (the `top` highest of them: adaptive), the
    two halves averaged."""
    X = VS.unit(X)
    C = X @ VS.unit(cohort).T
    if top:
        C = np.sort(C, axis=1)[:, -top:]
    mu, sd = C.mean(1), C.std(1) + 1e-6
    S = X @ X.T
    return 0.5 * ((S - mu[:, None]) / sd[:, None] + (S - mu[None, :]) / sd[None, :])


def snorm(data, args):
    pieces = training_pieces(args.programmes, args.seed, args.draws)
    X = np.stack([p[2] for p in pieces])
    clean = X[[p[1] == "clean" for p in pieces]]
    print(f"cohorts: the train split's people's pieces (training_pieces: {len(clean)} clean, "
          f"{len(X)} with the channels); AMI cohort: the other AMI set's pieces\n")
    emb = {s: np.stack([embed(mel(i[4])) for i in items]) for s, items in data.items()}
    ami = ami_pieces(args.ami_seconds)
    rows = []
    for name, cohort, top in [("none", None, 0),
                              ("S-norm, clean pieces", clean, 0),
                              ("AS-norm top 100, clean pieces", clean, 100),
                              ("S-norm, pieces through channels", X, 0),
                              ("AS-norm top 100, pieces through channels", X, 100)]:
        row = [name]
        for s, items in data.items():
            row += eers(items, emb[s], None if cohort is None else snormed(emb[s], cohort, top))
        for s, (r, E) in ami.items():
            row += across(r, E, None if cohort is None else snormed(E, cohort, top))
        rows.append(row)
    # On meetings, the cohort that a deployment would have: other meetings' voices.
    sets = list(ami)
    for top in (0, 100):
        row = [f"{'AS-norm top 100' if top else 'S-norm'}, the other AMI set's pieces", "", "",
               "", ""]
        for s, (r, E) in ami.items():
            other = ami[sets[1 - sets.index(s)]][1] if len(sets) == 2 else np.concatenate(
                [ami[o][1] for o in sets if o != s])
            row += across(r, E, snormed(E, other, top))
        rows.append(row)
    table(["normalisation"] + [f"{s} {k} EER" for s in data for k in KINDS]
          + [h for s in ami for h in (f"AMI {s} EER", f"AMI {s} pairs same/different")],
          rows)


def band_embedding(choice):
    """audio -> embedding for a --bands choice ("none", "mask LO-HI", "soft LO-HI", "lowpass
    LO-HI"), and what it keeps."""
    if choice == "none":
        return lambda a: embed(mel(a)), "all 40 mel bins"
    how, band = choice.split()
    lo, hi = (float(f) for f in band.split("-"))
    if how == "lowpass":
        sos = scipy.signal.butter(8, [lo, hi] if lo else hi, "bandpass" if lo else "lowpass",
                                  fs=P.RATE, output="sos")
        return (lambda a: embed(mel(scipy.signal.sosfiltfilt(sos, a).astype(np.float32))),
                f"audio filtered to {band} Hz")
    inside = (CENTRES >= lo) & (CENTRES <= hi)
    w = np.where(inside, 1.0, {"mask": 0.0, "soft": 1e-3}[how]).astype(np.float32)
    c = CENTRES[inside]
    return lambda a: embed(mel(a) * w), f"{len(c)} mel bins, centres {c[0]:.0f}-{c[-1]:.0f} Hz"


def bandlimit(data, args):
    rows, kept = [], []
    for choice in args.bands:
        f, what = band_embedding(choice)
        kept.append(f"{choice}: {what}")
        row = [choice]
        for s, items in data.items():
            row += eers(items, np.stack([f(i[4]) for i in items]))
        ami = ami_pieces(args.ami_seconds, f)
        row += [across(r, E)[0] for r, E in ami.values()]
        rows.append(row)
    print("kept: " + "; ".join(kept))
    print("AMI pairs same/different across recordings: "
          + ", ".join(f"{s} {across(r, E)[1]}" for s, (r, E) in ami.items()) + "\n")
    table(["band"] + [f"{s} {k} EER" for s in data for k in KINDS]
          + [f"AMI {s} EER" for s in ami], rows)


PARTS = {"equalise": equalise, "band": band, "backend": backend, "centroid": centroid,
         "snorm": snorm, "bandlimit": bandlimit}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", metavar="PART",
                    help=f"which parts to run, of {', '.join(PARTS)} (all by default)")
    ap.add_argument("--programmes", type=pathlib.Path,
                    default=P.ROOT / "build" / "programmes-hard" / "hard")
    ap.add_argument("--seed", type=int, default=7, help="the back-end's pieces and channels")
    ap.add_argument("--draws", type=int, default=3, help="channels each back-end piece goes through")
    ap.add_argument("--shrink", type=float, default=0.3)
    ap.add_argument("--ami-seconds", type=float, default=3.0)
    ap.add_argument("--bands", nargs="+", default=list(BANDS), metavar="BAND",
                    help="bandlimit's choices: none, mask LO-HI, soft LO-HI or lowpass LO-HI "
                         "(one argument each, quoted)")
    args = ap.parse_args()
    if set(args.parts) - set(PARTS):
        ap.error(f"parts are {', '.join(PARTS)}")
    data = {s: items_of(args.programmes / s) for s in SPLITS}
    print(f"programmes: {args.programmes}")
    describe(data)
    for name in args.parts or PARTS:
        print(f"## {name}\n")
        PARTS[name](data, args)


if __name__ == "__main__":
    main()
