#!/usr/bin/env python3
"""Converts Resemblyzer 0.1.4's pretrained.pt (GE2E voice encoder, Apache-2.0) to ONNX, without torch.

Graph (opset 17): mel [batch, frames, 40] (mel power spectrogram, batch first) -> Transpose ->
three LSTM nodes (hidden 256, forward) -> Y_h of the last -> Gemm(linear_W, linear_b, transB=1) ->
Relu -> LpNormalization(p=2, axis=-1) -> embedding [batch, 256].
Initializers: lstm_l{0,1,2}_W [1, 1024, in], lstm_l{0,1,2}_R [1, 1024, 256], lstm_l{0,1,2}_B
[1, 2048] in ONNX gate order (i, o, f, c); linear_W [256, 256] (out x in), linear_b [256].

The output is byte-identical for the same pretrained.pt (scripts/models/fetch_voice_model.sh pins
its sha256). --verify (the default where onnxruntime is importable) compares ONNX Runtime with the
numpy forward of the original PyTorch-order weights.
"""
import argparse
import hashlib
import pathlib
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import ge2e_numpy  # noqa: E402

HIDDEN = ge2e_numpy.HIDDEN
METADATA = {
    "encoder": "resemblyzer-ge2e-0.1.4",
    "embedding_dim": "256",
    "mel_bands": "40",
    "partial_frames": "160",
    "sample_rate": "16000",
    "n_fft": "400",
    "hop_length": "160",
}
# Pinned rather than onnx's current IR version, so the bytes do not change with the onnx package.
IR_VERSION = 8


def onnx_gate_order(a):
    """PyTorch stacks the gates (i, f, g, o) along the first axis; ONNX wants (i, o, f, c)."""
    i, f, g, o = np.split(a, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


def build_model(weights, source_sha256):
    inits, nodes = [], []

    def init(name, array):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array, np.float32), name))

    # Squeeze's axes as Constant nodes, so the initializers are only the weights.
    for name, axis in (("axis0", 0), ("axis1", 1)):
        nodes.append(helper.make_node("Constant", [], [name],
                                      value=numpy_helper.from_array(np.array([axis], np.int64), name)))
    nodes.append(helper.make_node("Transpose", ["mel"], ["x_l0"], perm=[1, 0, 2]))  # [frames, batch, 40]
    for k in range(ge2e_numpy.LAYERS):
        init(f"lstm_l{k}_W", onnx_gate_order(weights[f"lstm.weight_ih_l{k}"])[None])
        init(f"lstm_l{k}_R", onnx_gate_order(weights[f"lstm.weight_hh_l{k}"])[None])
        b = np.concatenate([onnx_gate_order(weights[f"lstm.bias_ih_l{k}"]),
                            onnx_gate_order(weights[f"lstm.bias_hh_l{k}"])])
        init(f"lstm_l{k}_B", b[None])
        last = k == ge2e_numpy.LAYERS - 1
        # Y [frames, 1, batch, 256] feeds the next layer; the last layer only gives Y_h [1, batch, 256].
        outputs = ["", "h_last"] if last else [f"y_l{k}"]
        nodes.append(helper.make_node("LSTM", [f"x_l{k}", f"lstm_l{k}_W", f"lstm_l{k}_R", f"lstm_l{k}_B"],
                                      outputs, name=f"lstm_l{k}", hidden_size=HIDDEN, direction="forward"))
        if not last:
            nodes.append(helper.make_node("Squeeze", [f"y_l{k}", "axis1"], [f"x_l{k + 1}"]))
    init("linear_W", weights["linear.weight"])
    init("linear_b", weights["linear.bias"])
    nodes += [
        helper.make_node("Squeeze", ["h_last", "axis0"], ["h"]),
        helper.make_node("Gemm", ["h", "linear_W", "linear_b"], ["linear"], transB=1),
        helper.make_node("Relu", ["linear"], ["relu"]),
        helper.make_node("LpNormalization", ["relu"], ["embedding"], p=2, axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "ge2e_voice_encoder",
        [helper.make_tensor_value_info("mel", TensorProto.FLOAT, ["batch", "frames", 40])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", 256])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION,
                              producer_name="convert_voice_model.py",
                              doc_string="GE2E voice encoder of Resemblyzer 0.1.4 (Apache-2.0): "
                                         "40-band mel power spectrogram -> L2-normalised 256-d embedding")
    helper.set_model_props(model, {**METADATA, "source_sha256": source_sha256})
    onnx.checker.check_model(model, full_check=True)
    return model


def verify(model_path, weights):
    """ONNX Runtime on random mel power spectrograms of a few partials against the numpy forward."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    # Log-normal, spread like real mel power values (about 1e-6 .. 1e2).
    mels = np.exp(rng.normal(-4, 3, (4, 160, 40))).astype(np.float32)
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"mel": mels})[0].astype(np.float64)
    want = ge2e_numpy.forward(weights, mels)
    cos = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    print(f"convert_voice_model: verify: {len(mels)} partials of 160 frames: max |diff| "
          f"{np.abs(got - want).max():.3g}, min cosine 1 - {1 - cos.min():.2g}")
    if not cos.min() >= 0.99999:
        raise SystemExit("convert_voice_model: ONNX Runtime disagrees with the numpy forward")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pt", help="resemblyzer/pretrained.pt")
    ap.add_argument("onnx", help="output, e.g. models/voice-encoder-ge2e.onnx")
    try:
        import onnxruntime  # noqa: F401
        have_ort = True
    except ImportError:
        have_ort = False
    ap.add_argument("--verify", action=argparse.BooleanOptionalAction, default=have_ort,
                    help="check the export with ONNX Runtime (default: on where onnxruntime is importable)")
    a = ap.parse_args()

    start = time.perf_counter()
    pt = pathlib.Path(a.pt)
    source_sha256 = hashlib.sha256(pt.read_bytes()).hexdigest()
    weights = ge2e_numpy.load_pretrained(pt)
    model = build_model(weights, source_sha256)
    out = pathlib.Path(a.onnx)
    part = out.with_name(out.name + ".part")
    part.write_bytes(model.SerializeToString())
    if a.verify:
        verify(part, weights)
    part.replace(out)
    print(f"convert_voice_model: wrote {out} ({out.stat().st_size} bytes) in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
