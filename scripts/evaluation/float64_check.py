#!/usr/bin/env python3
"""Which is nearer the exact network: our engine or ONNX Runtime?

Evaluates segmentation-3.0 in float64 with NumPy (a direct transcription of the architecture in
../shared/SPEC.md, with the weights of models/segmentation-3.0.onnx, looked up by this export's tensor
names) on windows of a recording, and prints each window's max |difference| from float64 for ONNX
Runtime (float32, one thread) and for `speakerseg logits`.

  .venv/bin/python3 scripts/evaluation/float64_check.py [--input WAV] [--windows 0 18]
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from numpy.lib.stride_tricks import sliding_window_view
from onnx import numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reference"))
from make_reference import read_wav, pad, session, RATE  # noqa: E402


def float64_forward(model, window):
    I = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    nodes = model.graph.node
    norms = [n for n in nodes if n.op_type == "InstanceNormalization"]

    def inorm(v, k):  # v [C, T]
        mu = v.mean(1, keepdims=True)
        var = ((v - mu) ** 2).mean(1, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5) * I[norms[k].input[1]][:, None] + I[norms[k].input[2]][:, None]

    lrelu = lambda v: np.where(v < 0, 0.01 * v, v)
    pool = lambda v: v[:, : (v.shape[1] // 3) * 3].reshape(v.shape[0], -1, 3).max(2)
    sig = lambda a: 1 / (1 + np.exp(-a))

    v = inorm(window.astype(np.float64)[None], 0)[0]
    sinc = I["/sincnet/conv1d.0/Concat_2_output_0"][:, 0, :]
    y = (sliding_window_view(v, 251)[::10] @ sinc.T).T
    y = lrelu(inorm(pool(np.abs(y)), 1))
    for k, name in enumerate(("sincnet.conv1d.1", "sincnet.conv1d.2")):
        z = np.einsum("clk,ock->ol", sliding_window_view(y, 5, axis=1), I[name + ".weight"])
        y = lrelu(inorm(pool(z + I[name + ".bias"][:, None]), 2 + k))
    h = y.T
    for n in (n for n in nodes if n.op_type == "LSTM"):
        W, R, B = I[n.input[1]], I[n.input[2]], I[n.input[3]]
        T = h.shape[0]
        out = np.zeros((T, 256))
        for d in range(2):
            hh, c = np.zeros(128), np.zeros(128)
            pre = h @ W[d].T + B[d, :512] + B[d, 512:]
            for s in range(T):
                t = s if d == 0 else T - 1 - s
                g = pre[t] + R[d] @ hh
                c = sig(g[256:384]) * c + sig(g[:128]) * np.tanh(g[384:])
                hh = sig(g[128:256]) * np.tanh(c)
                out[t, d * 128 : (d + 1) * 128] = hh
        h = out
    h = lrelu(h @ I["onnx::MatMul_915"] + I["linear.0.bias"])
    h = lrelu(h @ I["onnx::MatMul_916"] + I["linear.1.bias"])
    z = h @ I["onnx::MatMul_917"] + I["ortshared_1_1_7_0_token_109"]
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "models" / "segmentation-3.0.onnx"))
    ap.add_argument("--input", default=str(ROOT.parent / "shared" / "data" / "pyannote-debug" / "sample.wav"))
    ap.add_argument("--windows", type=int, nargs="+", default=[0, 18])
    a = ap.parse_args()

    x = read_wav(a.input)
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "ours.npy"
        subprocess.run([str(ROOT / "build" / "tools" / "speakerseg"), "logits", "--model", a.model,
                        "--input", a.input, "--output", str(out)], check=True, capture_output=True)
        ours = np.load(out)
    model = onnx.load(a.model)
    sess = session(a.model)
    print("| window start (s) | ONNX Runtime vs float64 | ours vs float64 | ours vs ONNX Runtime |")
    print("|---:|---:|---:|---:|")
    for w in a.windows:
        win = pad(x[w * RATE :])
        exact = float64_forward(model, win)
        ref = sess.run(None, {"input": win[None, None, :]})[0][0]
        print(f"| {w} | {np.abs(ref - exact).max():.2e} | {np.abs(ours[w] - exact).max():.2e} | "
              f"{np.abs(ours[w] - ref).max():.2e} |")


if __name__ == "__main__":
    main()
