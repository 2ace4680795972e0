#!/usr/bin/env python3
"""diart's online clustering (Coria et al. 2021, "Overlap-aware low-latency online speaker
diarization based on end-to-end local segmentation") on the broadcast-like programmes, with OUR
models (models/segmentation-3.0.onnx, models/voice-encoder-ge2e.onnx) and OUR window schedule,
scored as scripts/evaluation/evaluate.py scores our own identity decisions, so the rows compare
directly.

Our own reimplementation from the facts of diart's source (diart/blocks/{clustering,embedding,
aggregation,diarization}.py, diart/mapping.py, diart/functional.py); no diart code is used.

  windows       10 s windows every --step 1 s, left zero-padded as our stream does: they end at
                1, 2, 3, ... s, the last one (zero-padded on the right) at or after the end of the
                audio, so every second is covered.
  activations   per local speaker k of a window: "soft" = sum of the powerset probabilities of the
                classes holding k (exp of the log-probabilities); "hard" = the argmax class one-hot
                mapped to speakers, which is what diart feeds its pipeline from a powerset model
                (its PowersetAdapter calls pyannote.audio's Powerset.to_multilabel, hard by
                default).
  embeddings    diart's overlapped-speech penalty (functional.overlapped_speech_penalty, gamma 3,
                beta 10): w_k = a_k^gamma * softmax(beta * a)_k^gamma per frame. GE2E has no
                weighted statistics pooling, so the weights select frames instead: the frames
                with w_k >= 0.5 (a_k clearly dominant), each frame the 16.875 ms of samples around
                its centre, are joined and embedded as one utterance: raised to -30 dBFS (never
                lowered, at most +40 dB, as our utterance embedding and Resemblyzer's
                preprocess_wav do), librosa mel (n_fft 400, hop 160, 40 bands, power), partials of
                160 frames every 77 frames padded to cover the utterance (Resemblyzer's slicing,
                min coverage 0.75), mean of the partial embeddings, renormalised. A local speaker
                with under --min-embed 0.5 s of such frames gets no embedding (diart: NaN, never
                active for the clustering).
  clustering    diart's OnlineSpeakerClustering: a local speaker is active if its max activation
                >= tau_active and it has an embedding, "long" if its mean activation >= rho_update;
                cosine distance (1 - cosine, as pyannote.core's cdist) between active local
                speakers and the known centroids; Hungarian assignment (cannot-link: two local
                speakers of a window never share a global speaker); a pair is kept if its distance
                < delta_new; an unmatched long speaker opens a new centroid (if fewer than
                --max-speakers exist), an unmatched short one is put on the closest known centroid
                not taken in this window (whatever its distance); kept pairs of long speakers add
                their embedding to the centroid (diart sums). ENROLMENT: the centroids start as the
                embeddings of the programme's enrolled anchors/hosts (each enrolment clip one
                utterance), labelled with their reader id; new speakers are spk0, spk1, ...
  aggregation   diart's DelayedAggregation with Hamming weights: a frame at t is final once the
                first window ending at >= t + latency is processed; its global activations are the
                Hamming-weighted mean over the windows processed by then that cover it, each
                remapped to global speakers by the map its window got when it was processed
                (the nearest frame of each window, on a grid of 16.875 ms).
  hypotheses    "diart": every global speaker whose aggregated activation > tau_active (diart's
                Binarize), gaps under 0.1 s merged; "one at a time": per frame only the most
                active global speaker, if > tau_active (like our announced timeline).

Scoring reuses scripts/evaluation/evaluate.py (recordings(), named_seconds(), figures()): DER with
no collar, overlap scored, pooled over a set; confusion, missed, FA as fractions of reference
speech; labels / people; anchor recall, anchor FA and anchor named of announced over the enrolled
people. The programmes' references have no overlap.

The networks run once per programme; their outputs (log-probabilities of every window, the
per-window embeddings for both activation kinds, the enrolment embeddings) are cached in
--cache (np.savez) so tuning the clustering re-runs nothing heavy. ONNX Runtime uses one thread.

  nice -n 10 .venv/bin/python3 scripts/evaluation/diart_compare.py --grid --ami-defaults \\
      --per-recording
      # tune on programmes-train (lowest DER, then confusion; the best setting per activation kind
      # and hypothesis), report --sets at it; 7 min with an empty cache on a shared 2-core Xeon
      # (the networks 6 min), about 1 min from the cache
  nice -n 10 .venv/bin/python3 scripts/evaluation/diart_compare.py --sets programmes-development \\
      --activations hard --delta-new 0.2 --rho-update 0.2 --tau-active 0.5   # one setting
  options: --sets programmes-train programmes-development  --latency 2  --activations soft hard
           --grid-set programmes-train (programmes-development: a bound, not a figure)
           --grid-delta 0.15 ... 0.8  --grid-rho 0.05 0.1 0.2 0.3 0.42  --grid-tau 0.5 0.55
           --cache /tmp/diart/cache  --min-embed 0.5  --max-speakers 20  --enrol on|off
           --per-recording (a row per programme)
           --ami-defaults (also diart's published AMI setting, README: tau 0.507, rho 0.006,
           delta 1.057 on cosine distance; GE2E's ReLU embeddings have cosines >= 0, so a distance
           under 1.057 always matches and no speaker is new while a free centroid is left)
"""
import argparse
import itertools
import math
import pathlib
import sys
import time

import librosa
import numpy as np
import onnxruntime as ort
from pyannote.core import Annotation, Segment
from scipy.io import wavfile
from scipy.optimize import linear_sum_assignment

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import evaluate  # noqa: E402
import programmes  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RATE = 16000
WINDOW = 10 * RATE
FRAMES = 589
FRAME_STEP = 0.016875
FRAME_OFFSET = 0.03096875  # centre of frame 0 from the window start
# Powerset classes {}, {0}, {1}, {2}, {0,1}, {0,2}, {1,2} -> local speakers.
POWERSET = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1],
                     [1, 1, 0], [1, 0, 1], [0, 1, 1]], dtype=np.float32)
KINDS = ("soft", "hard")
# GE2E utterance embedding (Resemblyzer's slicing).
MEL_HOP, PARTIAL, PARTIAL_STEP, MIN_COVERAGE = 160, 160, 77, 0.75
TARGET_DBFS, MAX_GAIN_DB = -30.0, 40.0
CACHE_VERSION = 1


# ---------------------------------------------------------------- networks

def sessions():
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    make = lambda name: ort.InferenceSession(str(ROOT / "models" / name), opts,
                                             providers=["CPUExecutionProvider"])
    return make("segmentation-3.0.onnx"), make("voice-encoder-ge2e.onnx")


def read_wav(path):
    rate, x = wavfile.read(str(path))
    assert rate == RATE and x.ndim == 1, path
    return x.astype(np.float32) / 32768 if x.dtype == np.int16 else x.astype(np.float32)


def window_ends(n_samples, step):
    """Sample index of each window's end: step, 2 step, ... up to the first >= n_samples."""
    count = max(1, math.ceil(n_samples / step))
    return np.arange(1, count + 1, dtype=np.int64) * step


def window_audio(audio, end):
    """The 10 s ending at sample `end`, zero-padded where it lies outside the audio."""
    out = np.zeros(WINDOW, dtype=np.float32)
    start = end - WINDOW
    lo, hi = max(start, 0), min(end, len(audio))
    if hi > lo:
        out[lo - start:hi - start] = audio[lo:hi]
    return out


def segment(seg, audio, ends, batch=16):
    """[windows, 589, 7] powerset log-probabilities."""
    out = []
    for i in range(0, len(ends), batch):
        x = np.stack([window_audio(audio, e) for e in ends[i:i + batch]])[:, None, :]
        out.append(seg.run(None, {"input": x})[0])
    return np.concatenate(out).astype(np.float32)


def activations(logp, kind):
    """[..., 589, 3] per-local-speaker activations from powerset log-probabilities."""
    if kind == "soft":
        return np.exp(logp) @ POWERSET
    return POWERSET[np.argmax(logp, axis=-1)]


def overlap_penalty(act, gamma=3.0, beta=10.0):
    """diart's overlapped-speech penalty weights (paper eq. 2) of [..., frames, speakers]."""
    z = beta * act
    soft = np.exp(z - z.max(axis=-1, keepdims=True))
    soft /= soft.sum(axis=-1, keepdims=True)
    return np.maximum(act ** gamma * soft ** gamma, 1e-8)


_CENTRES = FRAME_OFFSET + FRAME_STEP * np.arange(FRAMES)
_LO = np.maximum(0, np.rint((_CENTRES - FRAME_STEP / 2) * RATE).astype(np.int64))
_HI = np.minimum(WINDOW, np.rint((_CENTRES + FRAME_STEP / 2) * RATE).astype(np.int64))


def frame_samples(frames):
    """Sample mask over a window of the given frames' 16.875 ms around their centres."""
    edge = np.zeros(WINDOW + 1, dtype=np.int32)
    np.add.at(edge, _LO[frames], 1)
    np.add.at(edge, _HI[frames], -1)
    return np.cumsum(edge[:-1]) > 0


def raise_volume(x):
    power = float(np.mean(x.astype(np.float64) ** 2)) if len(x) else 0.0
    if power <= 0:
        return x
    change = TARGET_DBFS - 10 * math.log10(power)
    return x * np.float32(10 ** (min(change, MAX_GAIN_DB) / 20)) if change > 0 else x


def utterance_partials(x):
    """[partials, 160, 40] mel partials of an utterance, Resemblyzer's slicing (padded)."""
    n_frames = math.ceil((len(x) + 1) / MEL_HOP)
    starts = list(range(0, max(1, n_frames - PARTIAL + PARTIAL_STEP + 1), PARTIAL_STEP))
    coverage = (len(x) - starts[-1] * MEL_HOP) / (PARTIAL * MEL_HOP)
    if coverage < MIN_COVERAGE and len(starts) > 1:
        starts.pop()
    need = (starts[-1] + PARTIAL) * MEL_HOP
    x = np.pad(raise_volume(x), (0, max(0, need - len(x))))
    mel = librosa.feature.melspectrogram(y=x, sr=RATE, n_fft=400, hop_length=MEL_HOP,
                                         n_mels=40).T.astype(np.float32)
    return np.stack([mel[s:s + PARTIAL] for s in starts])


def embed_utterances(enc, utterances, batch=64):
    """[n, 256] utterance embeddings: the mean of each one's partial embeddings, renormalised."""
    if not utterances:
        return np.zeros((0, 256), dtype=np.float32)
    parts = [utterance_partials(u) for u in utterances]
    counts = [len(p) for p in parts]
    mels = np.concatenate(parts)
    emb = np.concatenate([enc.run(None, {"mel": mels[i:i + batch]})[0]
                          for i in range(0, len(mels), batch)])
    out, at = [], 0
    for c in counts:
        m = emb[at:at + c].mean(axis=0)
        out.append(m / np.linalg.norm(m))
        at += c
    return np.stack(out).astype(np.float32)


def window_embeddings(enc, audio, ends, logp, min_embed):
    """Per activation kind: [windows, 3, 256] embeddings (NaN where too little dominant speech)
    and [windows, 3] seconds of dominant speech. Identical selections are embedded once."""
    masks = {}
    for kind in KINDS:
        masks[kind] = overlap_penalty(activations(logp, kind)) >= 0.5  # [W, 589, 3]
    unique, index = [], {}
    slot = {kind: np.full((len(ends), 3), -1) for kind in KINDS}
    seconds = {kind: np.zeros((len(ends), 3), dtype=np.float32) for kind in KINDS}
    for w, end in enumerate(ends):
        x = None
        for kind in KINDS:
            for k in range(3):
                frames = masks[kind][w, :, k]
                key = (w, frames.tobytes())
                sel = frame_samples(frames)
                seconds[kind][w, k] = sel.sum() / RATE
                if seconds[kind][w, k] < min_embed:
                    continue
                if key not in index:
                    x = window_audio(audio, end) if x is None else x
                    index[key] = len(unique)
                    unique.append(x[sel])
                slot[kind][w, k] = index[key]
    emb = embed_utterances(enc, unique)
    out = {}
    for kind in KINDS:
        e = np.full((len(ends), 3, 256), np.nan, dtype=np.float32)
        ok = slot[kind] >= 0
        e[ok] = emb[slot[kind][ok]]
        out[kind] = e
    return out, seconds


def programme_cache(args, nets, wav, enrolled):
    """The networks' outputs for one programme, from --cache or computed and saved there."""
    path = pathlib.Path(args.cache) / f"{wav.stem}.step{args.step:g}.min{args.min_embed:g}.npz"
    if path.exists():
        z = np.load(path, allow_pickle=False)
        if int(z["version"]) == CACHE_VERSION:
            return {k: z[k] for k in z.files}
    seg, enc = nets
    t0 = time.time()
    audio = read_wav(wav)
    ends = window_ends(len(audio), round(args.step * RATE))
    logp = segment(seg, audio, ends)
    emb, seconds = window_embeddings(enc, audio, ends, logp, args.min_embed)
    names = np.array([name for name, _ in enrolled])
    prints = embed_utterances(enc, [read_wav(clip) for _, clip in enrolled])
    data = {"version": np.array(CACHE_VERSION), "samples": np.array(len(audio)), "ends": ends,
            "logp": logp, "emb_soft": emb["soft"], "emb_hard": emb["hard"],
            "sec_soft": seconds["soft"], "sec_hard": seconds["hard"],
            "enrolled_names": names, "enrolled_emb": prints.reshape(-1, 256)}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **data)
    print(f"diart_compare: {wav.stem}: {len(ends)} windows, networks {time.time() - t0:.0f} s",
          file=sys.stderr, flush=True)
    return data


# ---------------------------------------------------------------- clustering

class OnlineClustering:
    """diart's constrained incremental clustering (our implementation of its rules)."""

    def __init__(self, tau_active, rho_update, delta_new, max_speakers, seeds=(), names=()):
        self.tau, self.rho, self.delta = tau_active, rho_update, delta_new
        self.max_speakers = max_speakers
        self.centers = [np.asarray(s, dtype=np.float64) for s in seeds]
        self.labels = list(names)
        self.anonymous = 0
        self.started = bool(self.centers)

    def _new(self, embedding):
        self.centers.append(np.asarray(embedding, dtype=np.float64))
        self.labels.append(f"spk{self.anonymous}")
        self.anonymous += 1
        return len(self.centers) - 1

    def __call__(self, act, emb):
        """Global index of each local speaker of a window (-1: not mapped)."""
        n_local = act.shape[1]
        mapping = np.full(n_local, -1)
        has_emb = ~np.isnan(emb).any(axis=1)
        active = [k for k in range(n_local) if act[:, k].max() >= self.tau and has_emb[k]]
        long = {k for k in range(n_local) if act[:, k].mean() >= self.rho}
        if not self.started:  # diart's first window: every active speaker opens a centroid
            self.started = True
            for k in active[:self.max_speakers]:
                mapping[k] = self._new(emb[k])
            return mapping
        centers = np.array(self.centers).reshape(-1, emb.shape[1])
        centers = centers / np.linalg.norm(centers, axis=1, keepdims=True)
        e = emb[active].astype(np.float64).reshape(-1, emb.shape[1])
        # cosine distance, as pyannote.core's cdist(metric="cosine")
        dist = 1.0 - (e / np.linalg.norm(e, axis=1, keepdims=True)) @ centers.T
        rows, cols = (linear_sum_assignment(dist) if dist.size
                      else (np.zeros(0, int), np.zeros(0, int)))
        kept = {}
        for r, c in zip(rows, cols):
            if dist[r, c] < self.delta:
                kept[active[r]] = c
        taken = set(kept.values())
        new_ones, forced = [], {}
        for i, k in enumerate(active):
            if k in kept:
                continue
            if k in long and len(self.centers) + len(new_ones) < self.max_speakers:
                new_ones.append(k)
                continue
            free = [c for c in np.argsort(dist[i]) if c not in taken]
            if free:  # diart: the closest known centroid not taken, whatever its distance
                forced[k] = free[0]
                taken.add(free[0])
        for k, c in kept.items():
            if k in long:
                self.centers[c] += emb[k]
            mapping[k] = c
        for k, c in forced.items():
            mapping[k] = c
        for k in new_ones:
            mapping[k] = self._new(emb[k])
        return mapping


def cluster(data, kind, params, max_speakers, enrol):
    """Per-window local -> global maps [windows, 3] and the global labels."""
    if f"act_{kind}" not in data:
        data[f"act_{kind}"] = activations(data["logp"], kind)
    act, emb = data[f"act_{kind}"], data[f"emb_{kind}"]
    seeds, names = ((data["enrolled_emb"], [str(n) for n in data["enrolled_names"]])
                    if enrol else ((), ()))
    clu = OnlineClustering(params["tau_active"], params["rho_update"], params["delta_new"],
                           max_speakers, seeds, names)
    maps = np.stack([clu(act[w], emb[w]) for w in range(len(act))])
    return act, maps, clu.labels


# ---------------------------------------------------------------- aggregation

def aggregate(act, maps, ends, n_global, samples, latency):
    """[grid frames, n_global] Hamming-weighted activations at `latency`, on a 16.875 ms grid."""
    duration = samples / RATE
    n_grid = math.ceil(duration / FRAME_STEP)
    t = (np.arange(n_grid) + 0.5) * FRAME_STEP
    end_s = ends / RATE
    # the end of the window after which each grid frame is final (the last one at the end)
    final = np.searchsorted(end_s, t + latency - 1e-9)
    final_end = end_s[np.minimum(final, len(end_s) - 1)]
    num = np.zeros((n_grid, max(n_global, 1)))
    den = np.zeros(n_grid)
    hamming = np.hamming(FRAMES)
    for w, e in enumerate(end_s):
        start = e - 10
        lo = np.searchsorted(t, start)
        hi = np.searchsorted(t, e)
        if hi <= lo:
            continue
        idx = np.arange(lo, hi)
        idx = idx[final_end[idx] >= e - 1e-9]  # processed by the time the frame is final
        if not len(idx):
            continue
        f = np.clip(np.rint((t[idx] - start - FRAME_OFFSET) / FRAME_STEP).astype(int), 0,
                    FRAMES - 1)
        h = hamming[f]
        den[idx] += h
        for k in range(act.shape[2]):
            g = maps[w, k]
            if g >= 0:
                num[idx, g] += h * act[w, f, k]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den[:, None] > 0, num / den[:, None], 0.0)[:, :n_global]


def runs(active):
    """(first, last + 1) of each run of True."""
    d = np.diff(np.concatenate([[0], active.astype(np.int8), [0]]))
    return zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1))


def annotation(uri, frames_active, labels, min_gap=0.1):
    """Annotation from [grid frames, n_global] booleans; same-label gaps < min_gap merged."""
    hyp = Annotation(uri=uri)
    for g, label in enumerate(labels):
        for a, b in runs(frames_active[:, g]):
            hyp[Segment(a * FRAME_STEP, b * FRAME_STEP), f"{label}#{a}"] = label
    return hyp.support(collar=min_gap)


def hypotheses(uri, agg, labels, tau):
    """The multi-speaker ("diart") and the one-speaker-at-a-time hypotheses."""
    multi = agg > tau
    one = np.zeros_like(multi)
    if agg.shape[1]:
        best = np.argmax(agg, axis=1)
        rows = np.flatnonzero(agg[np.arange(len(agg)), best] > tau)
        one[rows, best[rows]] = True
    return {"diart": annotation(uri, multi, labels), "one at a time": annotation(uri, one, labels)}


# ---------------------------------------------------------------- scoring

def score_set(items, outputs, full):
    """evaluate.py's figures of a set: items (uri, ref, uem, enrolled names), outputs
    {uri: hypothesis}. full=False: DER and the anchor shares only (faster, for the grid); full:
    with a "per recording" row for each."""
    metrics = evaluate.new_metrics()
    if not full:
        metrics = {name: (m if name == "der" else None) for name, m in metrics.items()}
    extras = [evaluate.score(metrics, ref, outputs[uri], uem, names)
              for uri, ref, uem, names in items]
    row = evaluate.pooled(metrics, extras)
    if full:
        row["per recording"] = evaluate.per_recording(metrics, extras)
    return row


def load_set(args, set_name, nets):
    """[(uri, ref, uem, enrolled names)], {uri: cached network outputs}."""
    items, data = [], {}
    for wav, ref, uem, enrolled in evaluate.recordings(args, set_name, None):
        data[wav.stem] = programme_cache(args, nets, wav, enrolled)
        items.append((wav.stem, ref, uem, [name for name, _ in enrolled] if args.enrol == "on"
                      else []))
    return items, data


def run_setting(args, items, data, kind, params, full=True):
    """{hypothesis kind: figures} of one set at one clustering setting; with full, each
    figures row also holds "per recording": {uri: figures}."""
    outs = {"diart": {}, "one at a time": {}}
    for uri, _, _, _ in items:
        d = data[uri]
        act, maps, labels = cluster(d, kind, params, args.max_speakers, args.enrol == "on")
        agg = aggregate(act, maps, d["ends"], len(labels), int(d["samples"]), args.latency)
        for hyp_kind, hyp in hypotheses(uri, agg, labels, params["tau_active"]).items():
            outs[hyp_kind][uri] = hyp
    result = {}
    for hyp_kind, hyps in outs.items():
        result[hyp_kind] = score_set(items, hyps, full)
    return result


# ---------------------------------------------------------------- report

COLS = ["DER", "confusion", "missed", "FA", "labels", "anchor recall", "anchor FA",
        "anchor named of announced"]


def fmt(row, col):
    if col == "labels":
        return f"{row['labels']} / {row['people']}"
    v = row[col]
    return "—" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.3f}"


def print_header(extra=""):
    print(f"| set | method |{extra} DER | confusion | missed | FA | labels / people | "
          "anchor recall | anchor FA | named of announced |")
    print("|---|---|" + ("---|" if extra else "") + "---:|" * len(COLS))


def setting_name(kind, p):
    return (f"{kind}, tau {p['tau_active']:g}, rho {p['rho_update']:g}, "
            f"delta {p['delta_new']:g}")


def grid(args, items, data):
    """Every setting of the grid on one set; rows sorted by DER then confusion."""
    rows = []
    for kind, delta, rho, tau in itertools.product(args.activations, args.grid_delta,
                                                   args.grid_rho, args.grid_tau):
        p = {"tau_active": tau, "rho_update": rho, "delta_new": delta}
        for hyp_kind, fig in run_setting(args, items, data, kind, p, full=False).items():
            rows.append((fig["DER"], fig["confusion"], kind, p, hyp_kind, fig))
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["programmes-train", "programmes-development"],
                    choices=list(evaluate.PROGRAMMES))
    ap.add_argument("--latency", type=float, default=2.0)
    ap.add_argument("--step", type=float, default=1.0)
    ap.add_argument("--grid", action="store_true",
                    help="tune on --grid-set (lowest DER, then confusion), report --sets "
                         "at the best setting")
    ap.add_argument("--grid-set", default="programmes-train", choices=list(evaluate.PROGRAMMES),
                    help="the set the grid tunes on; programmes-development gives a bound (the "
                         "best any setting does there), not a figure")
    ap.add_argument("--grid-delta", type=float, nargs="+", default=[0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8])
    ap.add_argument("--grid-rho", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.3, 0.42])
    ap.add_argument("--grid-tau", type=float, nargs="+", default=[0.5, 0.55])
    ap.add_argument("--grid-rows", type=int, default=10)
    ap.add_argument("--delta-new", type=float, default=0.4)
    ap.add_argument("--rho-update", type=float, default=0.3)
    ap.add_argument("--tau-active", type=float, default=0.5)
    ap.add_argument("--ami-defaults", action="store_true",
                    help="also report diart's published AMI setting (tau 0.507, rho 0.006, "
                         "delta 1.057, cosine distance)")
    ap.add_argument("--activations", nargs="+", default=["soft", "hard"], choices=KINDS)
    ap.add_argument("--max-speakers", type=int, default=20)
    ap.add_argument("--min-embed", type=float, default=0.5,
                    help="seconds of dominant speech a local speaker needs for an embedding")
    ap.add_argument("--enrol", choices=["on", "off"], default="on")
    ap.add_argument("--per-recording", action="store_true",
                    help="a row per programme under each reported row")
    ap.add_argument("--cache", default="/tmp/diart/cache")
    ap.add_argument("--programmes", default=str(programmes.OUT))
    args = ap.parse_args()

    t0 = time.time()
    nets = sessions()
    sets = {s: load_set(args, s, nets) for s in dict.fromkeys(
        ([args.grid_set] if args.grid else []) + args.sets)}
    print("# command: .venv/bin/python3 scripts/evaluation/diart_compare.py "
          f"{' '.join(sys.argv[1:])}")
    print(f"# networks ready (cache {args.cache}) after {time.time() - t0:.0f} s\n")

    settings = []
    if args.grid:
        t1 = time.time()
        rows = grid(args, *sets[args.grid_set])
        print(f"## Grid on {args.grid_set}, latency {args.latency:g} s "
              f"({len(rows)} rows, {time.time() - t1:.0f} s); top {args.grid_rows}\n")
        print_header(" hypothesis |")
        for der, _, kind, p, hyp_kind, fig in rows[:args.grid_rows]:
            print(f"| {args.grid_set} | {setting_name(kind, p)} | {hyp_kind} | "
                  + " | ".join(fmt(fig, c) for c in COLS) + " |")
        print()
        best = {}
        for _, _, kind, p, hyp_kind, _ in rows:  # the best setting of each kind and hypothesis
            best.setdefault((kind, hyp_kind), p)
        for kind in args.activations:
            for hyp_kind in ("diart", "one at a time"):
                settings.append((f"diart tuned ({hyp_kind})", kind, best[(kind, hyp_kind)],
                                 hyp_kind))
    else:
        p = {"tau_active": args.tau_active, "rho_update": args.rho_update,
             "delta_new": args.delta_new}
        for kind in args.activations:
            settings += [("diart", kind, p, h) for h in ("diart", "one at a time")]
    if args.ami_defaults:
        ami = {"tau_active": 0.507, "rho_update": 0.006, "delta_new": 1.057}
        for kind in args.activations:
            settings += [("diart AMI defaults", kind, ami, h) for h in ("diart", "one at a time")]

    print(f"## Sets at latency {args.latency:g} s\n")
    print_header()
    for set_name in args.sets:
        items, data = sets[set_name]
        done = {}
        for label, kind, p, hyp_kind in settings:
            key = (kind, tuple(sorted(p.items())))
            if key not in done:
                done[key] = run_setting(args, items, data, kind, p, full=True)
            fig = done[key][hyp_kind]
            print(f"| {set_name} | {label}: {hyp_kind} hypothesis; {setting_name(kind, p)} | "
                  + " | ".join(fmt(fig, c) for c in COLS) + " |", flush=True)
            if args.per_recording:
                for uri, r in fig["per recording"].items():
                    print(f"| {set_name}: {uri} | {label}: {hyp_kind}; {setting_name(kind, p)} | "
                          + " | ".join(fmt(r, c) for c in COLS) + " |", flush=True)
    print(f"\n# wall time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
