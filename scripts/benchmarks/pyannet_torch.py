#!/usr/bin/env python3
"""pyannote's PyanNet in PyTorch on the same windows as our engines: the peer a user would pick
instead, timed beside our rows in the GPU check (issue 36 §5). Not a dependency of the project:
it runs where torch is installed (the GPU image has it).

The network is built from torch.nn modules as pyannote.audio's PyanNet builds segmentation-3.0:
SincNet (instance norm of the waveform; 80 sinc filters of 251 taps at stride 10, |.|, max-pool 3,
instance norm, leaky ReLU; convolutions 80->60->60 of 5 taps, each with max-pool 3, instance norm,
leaky ReLU), one 4-layer bidirectional LSTM of 128 (batch-first, as pyannote calls cuDNN), linear
256->128->128 with leaky ReLU, linear 128->7, log-softmax. The weights are the ones in
models/segmentation-3.0.onnx (read with the onnx package, or from --weights, an .npz that
--export-weights writes where onnx is installed: the GPU bundle carries one). The sinc filters are
the export's folded constant: pyannote recomputes those 80 x 251 values from their band edges at
every forward pass, which is left out.

First it checks that it is the same network: on tests/reference's batch32 windows (real speech, the
reference's ONNX Runtime outputs, --reference) the largest log-probability difference and the
frames whose most likely class differs, in fp32. Then, per --batch and --mode, the median and p99
of forward passes of the same windows as `speakerseg bench` (the reference's 21 windows of
sample.wav, 10 s at 1 s steps, repeated to fill the batch), under torch.inference_mode as
pyannote's Inference runs it, for --seconds after a warm-up:

  fp32     TF32 off (torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 False)
  default  PyTorch's defaults (cuDNN may use TF32 in its convolutions and RNNs)
  graph    fp32, the whole forward pass captured once as a CUDA graph and replayed (CUDA only)
  fp16     torch.autocast to float16 (CUDA only)

One JSON line per row (the keys of `speakerseg bench --json`), then a Markdown table.

  python3 scripts/benchmarks/pyannet_torch.py [--device cuda] [--batch 1 32 512]
      [--mode fp32 default graph fp16] [--seconds 2] [--weights W.npz] [--threads N]
      [--reference build/tests/reference]
  .venv/bin/python3 scripts/benchmarks/pyannet_torch.py --export-weights W.npz
"""
import argparse
import json
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
WINDOW = 160000  # 10 s at 16 kHz
SINC_STRIDE = 10
HIDDEN = 128


def weights_from_onnx(path):
    """The network's weights, named as the torch module below names them, from the ONNX export."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    init = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    nodes = {}
    for n in graph.node:
        nodes.setdefault(n.op_type, []).append(n)
    w = {}
    norms = nodes["InstanceNormalization"]
    assert len(norms) == 4, "expected the waveform's and three SincNet instance norms"
    for name, n in zip(["wav_norm", "norm0", "norm1", "norm2"], norms):
        w[f"{name}.weight"], w[f"{name}.bias"] = init[n.input[1]], init[n.input[2]]
    sinc = [a for a in init.values() if a.shape == (80, 1, 251)]
    assert len(sinc) == 1, "expected the folded sinc filters, [80, 1, 251]"
    w["sinc.weight"] = sinc[0]
    for k, n in enumerate(nodes["Conv"]):
        w[f"conv{k + 1}.weight"], w[f"conv{k + 1}.bias"] = init[n.input[1]], init[n.input[2]]
    # ONNX orders an LSTM's gates i, o, f, c; torch i, f, c (g), o. B holds W's biases, then R's.
    order = lambda m: np.concatenate([m[i * HIDDEN:(i + 1) * HIDDEN] for i in (0, 2, 3, 1)])
    for layer, n in enumerate(nodes["LSTM"]):
        W, R, B = init[n.input[1]], init[n.input[2]], init[n.input[3]]
        for d, suffix in enumerate(["", "_reverse"]):
            w[f"lstm.weight_ih_l{layer}{suffix}"] = order(W[d])
            w[f"lstm.weight_hh_l{layer}{suffix}"] = order(R[d])
            w[f"lstm.bias_ih_l{layer}{suffix}"] = order(B[d][:4 * HIDDEN])
            w[f"lstm.bias_hh_l{layer}{suffix}"] = order(B[d][4 * HIDDEN:])
    adds = nodes["Add"]
    for name, mm, add in zip(["linear0", "linear1", "classifier"], nodes["MatMul"], adds):
        w[f"{name}.weight"] = init[mm.input[1]].T
        w[f"{name}.bias"] = init[next(i for i in add.input if i in init)]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}


def pyannet(torch, weights):
    nn, F = torch.nn, torch.nn.functional

    class PyanNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.wav_norm = nn.InstanceNorm1d(1, affine=True)
            self.sinc = nn.Conv1d(1, 80, 251, stride=SINC_STRIDE, bias=False)
            self.norm0 = nn.InstanceNorm1d(80, affine=True)
            self.conv1 = nn.Conv1d(80, 60, 5)
            self.norm1 = nn.InstanceNorm1d(60, affine=True)
            self.conv2 = nn.Conv1d(60, 60, 5)
            self.norm2 = nn.InstanceNorm1d(60, affine=True)
            self.lstm = nn.LSTM(60, HIDDEN, num_layers=4, bidirectional=True, batch_first=True)
            self.linear0 = nn.Linear(2 * HIDDEN, 128)
            self.linear1 = nn.Linear(128, 128)
            self.classifier = nn.Linear(128, 7)

        def forward(self, waveforms):  # [batch, 1, samples] -> [batch, frames, 7]
            x = self.wav_norm(waveforms)
            x = F.leaky_relu(self.norm0(F.max_pool1d(torch.abs(self.sinc(x)), 3)))
            x = F.leaky_relu(self.norm1(F.max_pool1d(self.conv1(x), 3)))
            x = F.leaky_relu(self.norm2(F.max_pool1d(self.conv2(x), 3)))
            x, _ = self.lstm(x.transpose(1, 2))
            x = F.leaky_relu(self.linear1(F.leaky_relu(self.linear0(x))))
            return F.log_softmax(self.classifier(x), dim=-1)

    net = PyanNet()
    net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    return net.eval()


def bench_windows(reference, batch):
    """The reference's windows of sample.wav, 10 s at 1 s steps, repeated to fill the batch."""
    x = np.load(reference / "all_windows.input.npy").reshape(-1, WINDOW)
    return x[np.arange(batch) % len(x)]


def set_tf32(torch, on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def parity(torch, net, device, reference):
    set_tf32(torch, False)
    x = np.load(reference / "batch32.input.npy").reshape(-1, 1, WINDOW)
    want = np.load(reference / "batch32.logprobs.npy")
    with torch.inference_mode():
        got = net(torch.from_numpy(x).to(device)).float().cpu().numpy()
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.abs(got - want).max()), int((got.argmax(-1) != want.argmax(-1)).sum())


def time_rows(torch, net, device, x, mode, seconds):
    """Seconds per forward pass of x in `mode`, one per timed pass."""
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    set_tf32(torch, mode == "default")

    def autocast(v):
        with torch.autocast("cuda", dtype=torch.float16):
            return net(v)

    with torch.inference_mode():
        run = autocast if mode == "fp16" else net
        if mode == "graph":
            static = x.clone()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # warm-up on a side stream, as capture requires
                for _ in range(3):
                    net(static)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                net(static)
            run = lambda v: graph.replay()  # noqa: E731
        for _ in range(3):
            run(x)
        sync()
        times, start = [], time.perf_counter()
        while time.perf_counter() - start < seconds or len(times) < 5:
            t = time.perf_counter()
            run(x)
            sync()
            times.append(time.perf_counter() - t)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32, 512])
    ap.add_argument("--mode", nargs="+", default=["fp32", "default", "graph", "fp16"],
                    choices=["fp32", "default", "graph", "fp16"])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (CPU)")
    ap.add_argument("--model", default=str(ROOT / "models" / "segmentation-3.0.onnx"))
    ap.add_argument("--weights", help="an .npz from --export-weights, where onnx is not installed")
    ap.add_argument("--export-weights", metavar="NPZ", help="write the weights and stop")
    ap.add_argument("--reference", default=str(ROOT / "build" / "tests" / "reference"))
    a = ap.parse_args()
    if a.export_weights:
        np.savez(a.export_weights, **weights_from_onnx(a.model))
        return 0

    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    weights = dict(np.load(a.weights)) if a.weights else weights_from_onnx(a.model)
    net = pyannet(torch, weights).to(device)
    where = (f"{torch.cuda.get_device_name(device)}, cuDNN {torch.backends.cudnn.version()}"
             if device.type == "cuda" else f"the CPU, {torch.get_num_threads()} threads")
    print(f"# PyanNet in PyTorch {torch.__version__} on {where}; command: python3 "
          f"{' '.join(sys.argv)}")
    reference = pathlib.Path(a.reference)
    diff, flipped = parity(torch, net, device, reference)
    print(json.dumps({"parity": "batch32 vs ONNX Runtime", "max_abs_logprob_diff": diff,
                      "argmax_flips": flipped}), flush=True)
    modes = [m for m in a.mode if device.type == "cuda" or m in ("fp32", "default")]
    rows = []
    for batch in a.batch:
        x = torch.from_numpy(bench_windows(reference, batch)[:, None, :]).to(device)
        for mode in modes:
            t = time_rows(torch, net, device, x, mode, a.seconds)
            row = {"engine": f"pytorch {mode}", "batch": batch, "median_ms": 1e3 * np.median(t),
                   "p99_ms": 1e3 * np.percentile(t, 99), "windows_per_s": batch / np.median(t),
                   "runs": len(t)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| PyTorch | batch | median ms | p99 ms | windows/s |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['engine']} | {r['batch']} | {r['median_ms']:.2f} | {r['p99_ms']:.2f} | "
              f"{r['windows_per_s']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
