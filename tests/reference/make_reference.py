#!/usr/bin/env python3
"""Reference log-probabilities from ONNX Runtime for the engine parity tests.

ONNX Runtime runs on the CPU with one thread, sequentially, so the reference is deterministic.
Cases (each written as <case>.input.npy [B, T] and <case>.logprobs.npy [B, frames, 7]):
  first_window   the first 10 s of the recording
  last_partial   its last 5 s, zero-padded to 10 s (pyannote's last window)
  five_seconds   its first 5 s as a 5 s window (293 frames)
  batch32        32 windows of 10 s from the other recordings
  sinc_computed  the first window through a variant of the model whose SincNet filters are computed
                 in the graph from low_hz_/band_hz_ (written as sinc_computed.onnx)
  all_windows    every window of the recording at 1 s steps, as `speakerseg logits` slides

Recordings come from ../shared/data/pyannote-debug; where that folder is absent, two espeak-ng
voices are synthesised instead. With CI=true the shared recordings are required.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import wave

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper, TensorProto

RATE = 16000
WINDOW = 10 * RATE


def read_wav(path):
    """16 kHz mono, 16-bit PCM or float32, scaled as libsndfile scales it."""
    from scipy.io import wavfile

    rate, x = wavfile.read(str(path))
    if rate != RATE or x.ndim != 1:
        raise SystemExit(f"{path}: expected 16 kHz mono")
    if x.dtype == np.int16:
        return x.astype(np.float32) / 32768
    if x.dtype == np.float32:
        return x
    raise SystemExit(f"{path}: expected 16-bit PCM or float32 samples, got {x.dtype}")


def write_wav(path, x):
    pcm = np.clip(np.round(x * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())


def espeak_conversation(out_wav):
    """About 32 s of two synthetic speakers taking turns, for machines without the shared data."""
    from scipy.signal import resample_poly

    lines = [
        ("en-us", "Good evening, and welcome to the late news on channel four."),
        ("en+f3", "Thank you. Tonight we start with the weather, which has been unusually warm."),
        ("en-us", "Indeed, the temperatures reached a record high in the north of the country."),
        ("en+f3", "Farmers say the harvest came early, and markets are full of fresh fruit."),
        ("en-us", "We will be back after a short break with the sports results."),
        ("en+f3", "And later, an interview with the mayor about the new railway line."),
    ]
    pieces, turns, t = [], [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (voice, text) in enumerate(lines):
            f = pathlib.Path(tmp) / f"{i}.wav"
            subprocess.run(["espeak-ng", "-v", voice, "-s", "150", "-w", str(f), text], check=True)
            with wave.open(str(f)) as w:
                rate = w.getframerate()
                x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768
            speech = resample_poly(x, RATE, rate).astype(np.float32)
            voiced = np.flatnonzero(np.abs(speech) > 0.01)
            turns.append((t + voiced[0] / RATE, (voiced[-1] - voiced[0]) / RATE, voice))
            pieces += [speech, np.zeros(RATE // 3, np.float32)]
            t += (len(speech) + RATE // 3) / RATE
    x = np.concatenate(pieces)
    write_wav(out_wav, x)
    with open(out_wav.with_suffix(".rttm"), "w") as f:
        for start, duration, voice in turns:
            f.write(f"SPEAKER speech 1 {start:.3f} {duration:.3f} <NA> <NA> {voice} <NA> <NA>\n")
    return read_wav(out_wav)


def sinc_computed_variant(model_path, out_path):
    """The model with its folded SincNet weight replaced by the graph that computes it from band
    edges (asteroid's ParamSincFB at its mel-scale initialisation), as some exports carry it."""
    m = onnx.load(str(model_path))
    g = m.graph
    conv_w = next(i for i in g.initializer if list(i.dims) == [80, 1, 251])
    name = conv_w.name
    g.initializer.remove(conv_w)

    to_mel = lambda hz: 2595 * np.log10(1 + hz / 700)
    to_hz = lambda mel: 700 * (10 ** (mel / 2595) - 1)
    hz = to_hz(np.linspace(to_mel(30), to_mel(RATE / 2 - 100), 41, dtype="float32")).astype(np.float32)
    low_hz_, band_hz_ = hz[:-1].reshape(40, 1), np.diff(hz).reshape(40, 1).astype(np.float32)
    n_ = (2 * np.pi * np.arange(-125, 0, dtype=np.float32) / RATE).reshape(1, -1).astype(np.float32)
    window_ = np.hamming(251)[:125].astype(np.float32).reshape(1, -1)

    c = lambda nm, v: g.initializer.append(numpy_helper.from_array(np.asarray(v, np.float32), nm))
    c("sinc/band_edge_a", low_hz_)  # deliberately unnamed: the loader must tell them apart by structure
    c("sinc/band_edge_b", band_hz_)
    c("sinc/n", n_)
    c("sinc/n_half", n_ / 2)
    c("sinc/window", window_)
    c("sinc/50", [50.0])
    c("sinc/8000", [RATE / 2])
    c("sinc/2", [2.0])
    c("sinc/zero", np.zeros((40, 1), np.float32))
    g.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "sinc/axis1"))
    N = lambda op, ins, out, **kw: helper.make_node(op, ins, [out], **kw)
    nodes = [
        N("Abs", ["sinc/band_edge_a"], "s_abs_low"),
        N("Add", ["s_abs_low", "sinc/50"], "s_low"),
        N("Abs", ["sinc/band_edge_b"], "s_abs_band"),
        N("Add", ["s_low", "sinc/50"], "s_low50"),
        N("Add", ["s_low50", "s_abs_band"], "s_high0"),
        N("Clip", ["s_high0", "sinc/50", "sinc/8000"], "s_high"),
        N("Sub", ["s_high", "s_low"], "s_band"),
        N("MatMul", ["s_low", "sinc/n"], "s_ft_low"),
        N("MatMul", ["s_high", "sinc/n"], "s_ft_high"),
        N("Sin", ["s_ft_high"], "s_sin_h"), N("Sin", ["s_ft_low"], "s_sin_l"),
        N("Cos", ["s_ft_high"], "s_cos_h"), N("Cos", ["s_ft_low"], "s_cos_l"),
        N("Sub", ["s_sin_h", "s_sin_l"], "s_e0"), N("Div", ["s_e0", "sinc/n_half"], "s_e1"),
        N("Mul", ["s_e1", "sinc/window"], "s_eleft"),
        N("Sub", ["s_cos_l", "s_cos_h"], "s_o0"), N("Div", ["s_o0", "sinc/n_half"], "s_o1"),
        N("Mul", ["s_o1", "sinc/window"], "s_oleft"),
        N("Mul", ["s_band", "sinc/2"], "s_2band"),
        helper.make_node("Slice", ["s_eleft", "sinc/rs", "sinc/re", "sinc/axis1", "sinc/rstep"], ["s_eright"]),
        helper.make_node("Slice", ["s_oleft", "sinc/rs", "sinc/re", "sinc/axis1", "sinc/rstep"], ["s_oright0"]),
        N("Neg", ["s_oright0"], "s_oright"),
        N("Concat", ["s_eleft", "s_2band", "s_eright"], "s_even0", axis=1),
        N("Concat", ["s_oleft", "sinc/zero", "s_oright"], "s_odd0", axis=1),
        N("Div", ["s_even0", "s_2band"], "s_even"),
        N("Div", ["s_odd0", "s_2band"], "s_odd"),
        N("Concat", ["s_even", "s_odd"], "s_filters", axis=0),
        helper.make_node("Unsqueeze", ["s_filters", "sinc/axis1"], [name]),
    ]
    for nm, v in (("sinc/rs", [-1]), ("sinc/re", [-(2**62)]), ("sinc/rstep", [-1])):
        g.initializer.append(numpy_helper.from_array(np.array(v, np.int64), nm))
    for i, node in enumerate(nodes):
        g.node.insert(i, node)
    onnx.checker.check_model(m)
    onnx.save(m, str(out_path))


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def pad(x, n=WINDOW):
    out = np.zeros(n, np.float32)
    out[: min(n, len(x))] = x[:n]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, help="folder with sample.wav and the other recordings")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stamp")
    ap.add_argument("--synthesise", action="store_true",
                    help="use the espeak-ng recording even where the shared recordings exist")
    a = ap.parse_args()

    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    model = pathlib.Path(a.model)
    if not model.is_file():
        raise SystemExit(f"model {model} not found: run scripts/setup.sh first")
    data = pathlib.Path(a.data)
    if (data / "sample.wav").is_file() and not a.synthesise:
        source = "shared"
        main_wav = data / "sample.wav"
        x = read_wav(main_wav)
        others = sorted(p for p in data.glob("*.wav") if p.name != "sample.wav")
        batch = [pad(read_wav(p)[o * RATE :]) for p in others for o in (0, 10, 20)][:32]
    else:
        if os.environ.get("CI") == "true" and not a.synthesise:
            raise SystemExit(f"CI=true but the shared recordings are missing ({data}): they must be tested in CI")
        if not a.synthesise:
            print(f"make_reference: {data} not found; synthesising two espeak-ng voices instead", file=sys.stderr)
        source = "espeak"
        main_wav = out / "speech.wav"
        x = espeak_conversation(main_wav)
        batch = [pad(x[int(o * RATE / 2) :]) for o in range(32)]
    if len(batch) != 32:
        raise SystemExit(f"expected 32 windows for batch32, got {len(batch)}")

    seg = session(model)
    cases = {
        "first_window": (seg, np.stack([pad(x)])),
        "last_partial": (seg, np.stack([pad(x[len(x) - 5 * RATE :])])),
        "five_seconds": (seg, np.stack([x[: 5 * RATE]])),
        "batch32": (seg, np.stack(batch)),
    }
    sinc_model = out / "sinc_computed.onnx"
    sinc_computed_variant(model, sinc_model)
    cases["sinc_computed"] = (session(sinc_model), np.stack([pad(x)]))
    starts = list(range(0, len(x) - WINDOW + 1, RATE))
    if (len(x) - WINDOW) % RATE:
        starts.append(len(starts) * RATE)
    cases["all_windows"] = (seg, np.stack([pad(x[s:]) for s in starts]))

    for name, (sess, inputs) in cases.items():
        inputs = inputs.astype(np.float32)
        logprobs = sess.run(None, {"input": inputs[:, None, :]})[0]
        np.save(out / f"{name}.input.npy", inputs)
        np.save(out / f"{name}.logprobs.npy", logprobs)
        print(f"make_reference: {name}: input {inputs.shape} -> {logprobs.shape}", file=sys.stderr)
    (out / "manifest.txt").write_text(
        f"source {source}\nrecording {main_wav}\nrttm {main_wav.with_suffix('.rttm')}\nonnxruntime {ort.__version__}\n")
    if a.stamp:
        pathlib.Path(a.stamp).write_text(source + "\n")


if __name__ == "__main__":
    main()
