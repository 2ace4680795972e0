#!/usr/bin/env python3
"""Side-by-side speed of our CPU engine and ONNX Runtime on the same windows, in one run.

Both take 10 s windows at 1 s steps through the same recording (repeated to fill a batch), the same
thread count, one warm-up batch, then the median of timed batches over --seconds each. ONNX Runtime
runs with intra_op_num_threads = threads, inter_op 1, sequential execution, all graph optimisations.
Ours runs `speakerseg bench` in a separate process (so neither one's thread pool disturbs the
other). Prints a Markdown table with the ratio ours / ONNX Runtime, our time per stage, and each
stage's rate against the ceilings of one core that `tools/cpu_peak` measures (a register-only FMA
loop, vector reads from L1, L2 and memory).

With --voice, the GE2E voice encoder the same way: 160-frame mel partials (every 80 frames of the
recording's mel, repeated to fill a batch; librosa's mel for ONNX Runtime, ours for
`speakerseg bench-voice`, equal to 1e-5), partials per second at each batch size.

With --precision fp32 bf16 (the default where the CPU has AVX512_BF16), ours also at precision
bf16 (the LSTM products in bf16, an exploration: docs/performance.md), side by side in the same run.

  .venv/bin/python3 scripts/benchmarks/bench_vs_onnxruntime.py [--threads 1 2] [--batch 1 32]
                                                               [--seconds 5]
                                                               [--precision fp32 [bf16]]
                                                               [--voice [--voice-batch 1 8 32]]
"""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reference"))
from make_reference import read_wav, pad, RATE, WINDOW  # noqa: E402


def windows(path, batch):
    x = read_wav(path)
    starts = list(range(0, max(1, len(x) - WINDOW + 1), RATE))
    return np.stack([pad(x[starts[i % len(starts)] :]) for i in range(batch)]).astype(np.float32)


def bench_ort(model, x, threads, seconds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    s = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    feed = {"input": x[:, None, :]}
    s.run(None, feed)
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < 3:
        t = time.perf_counter()
        s.run(None, feed)
        times.append(time.perf_counter() - t)
    return float(np.median(times)), len(times)


def voice_partials(path, batch):
    import librosa

    mel = librosa.feature.melspectrogram(y=read_wav(path), sr=RATE, n_fft=400, hop_length=160,
                                         n_mels=40).T.astype(np.float32)
    starts = list(range(0, len(mel) - 160 + 1, 80))
    return np.stack([mel[starts[i % len(starts)]:][:160] for i in range(batch)])


def print_setup(a):
    """What every table is measured on, and the command that made it."""
    print(f"# {cpu_name()}, {os.cpu_count()} cores; onnxruntime {ort.__version__}; input {a.input}")
    print(f"# command: {' '.join([os.path.relpath(sys.executable, os.getcwd())] + sys.argv)}\n")


def bench_voice(a):
    print_setup(a)
    header = "| threads | batch | ONNX Runtime partials/s |"
    for p in a.precision:
        header += f" ours {p} partials/s | ours {p} / ORT | ours {p}: ms of CPU per s of speech |"
    print(header)
    print("|---:|---:|---:|" + "---:|---:|---:|" * len(a.precision))
    for threads in a.threads:
        for batch in a.voice_batch:
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            s = ort.InferenceSession(a.voice_model, so, providers=["CPUExecutionProvider"])
            feed = {"mel": voice_partials(a.input, batch)}
            s.run(None, feed)
            times, start = [], time.perf_counter()
            while time.perf_counter() - start < a.seconds or len(times) < 3:
                t = time.perf_counter()
                s.run(None, feed)
                times.append(time.perf_counter() - t)
            ort_ps = batch / float(np.median(times))
            row = f"| {threads} | {batch} | {ort_ps:.1f} |"
            for precision in a.precision:
                out = subprocess.run(
                    [a.speakerseg, "bench-voice", "--engine", "cpu", "--voice-model", a.voice_model,
                     "--input", a.input, "--threads", str(threads), "--batch", str(batch),
                     "--seconds", str(a.seconds), "--precision", precision],
                    check=True, capture_output=True, text=True).stdout
                ours = json.loads(out)["partials_per_s"]
                # The stream embeds each stretch of clean speech once, as partials every 0.8 s.
                cpu_ms = threads * 1000 / (ours * 0.8)
                row += f" {ours:.1f} | {ours / ort_ps:.2f} | {cpu_ms:.0f} |"
            print(row, flush=True)


def has_bf16():
    return any(line.startswith("flags") and " avx512_bf16" in line for line in open("/proc/cpuinfo"))


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "models" / "segmentation-3.0.onnx"))
    ap.add_argument("--input", default=str(ROOT.parent / "shared" / "data" / "pyannote-debug" / "sample.wav"))
    ap.add_argument("--speakerseg", default=str(ROOT / "build" / "tools" / "speakerseg"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--precision", nargs="+", choices=["fp32", "bf16"],
                    default=["fp32", "bf16"] if has_bf16() else ["fp32"])
    ap.add_argument("--voice", action="store_true", help="the voice encoder instead of segmentation")
    ap.add_argument("--voice-model", default=str(ROOT / "models" / "voice-encoder-ge2e.onnx"))
    ap.add_argument("--voice-batch", type=int, nargs="+", default=[1, 8, 32])
    a = ap.parse_args()
    if a.voice:
        return bench_voice(a)

    print_setup(a)
    header = "| threads | batch | ONNX Runtime windows/s |"
    for p in a.precision:
        header += f" ours {p} windows/s | ours {p} / ORT |"
    print(header)
    print("|---:|---:|---:|" + "---:|---:|" * len(a.precision))
    stages = {}
    for threads in a.threads:
        for batch in a.batch:
            x = windows(a.input, batch)
            ort_s, _ = bench_ort(a.model, x, threads, a.seconds)
            ort_wps = batch / ort_s
            row = f"| {threads} | {batch} | {ort_wps:.1f} |"
            for precision in a.precision:
                out = subprocess.run(
                    [a.speakerseg, "bench", "--engine", "cpu", "--model", a.model, "--input", a.input,
                     "--threads", str(threads), "--batch", str(batch), "--seconds", str(a.seconds),
                     "--precision", precision, "--profile", "--json"],
                    check=True, capture_output=True, text=True).stdout
                ours = json.loads(out)
                stages[(precision, threads, batch)] = ours["stages_ms_per_window"]
                row += f" {ours['windows_per_s']:.1f} | {ours['windows_per_s'] / ort_wps:.2f} |"
            print(row, flush=True)

    names = list(next(iter(stages.values())).keys())
    print("\nOur time per stage, ms per window:\n")
    print("| precision | threads | batch | " + " | ".join(names) + " |")
    print("|---|---:|---:|" + "---:|" * len(names))
    for (precision, threads, batch), st in stages.items():
        print(f"| {precision} | {threads} | {batch} | " + " | ".join(f"{st[n]:.2f}" for n in names) + " |")
    distance_to_the_limit(a, stages)


# Multiply-adds per 10 s window of each stage as the CPU engine computes it (docs/performance.md).
STAGE_MACS = {"sinc+pool": 161e6, "conv1+pool": 128e6, "conv2+pool": 32e6, "lstm-input": 499e6,
              "lstm-recurrence": 309e6, "head": 29e6}
# Recurrent weights streamed per window at one sequence: 4 layers x 2 directions x 589 steps of a
# 128 x 512 float matrix.
RECURRENT_BYTES = 4 * 2 * 589 * 128 * 512 * 4


def distance_to_the_limit(a, stages):
    """Each stage's achieved rate against this machine's ceilings, measured by tools/cpu_peak."""
    peak_exe = pathlib.Path(a.speakerseg).parent / "cpu_peak"
    if not peak_exe.exists():
        print(f"\n(no {peak_exe}: no ceilings measured)")
        return
    peak = json.loads(subprocess.run([str(peak_exe), "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    fma = peak.get("fma_avx512_gflops", peak["fma_avx2_gflops"])
    bf16_dot = peak.get("dot_bf16_gflops")
    print(f"\nCeilings of one core ({peak_exe.name} --json, {peak['isa']}): FMA {fma:.1f} GFLOP/s"
          + (f", bf16 dot products (vdpbf16ps) {bf16_dot:.1f} GFLOP/s" if bf16_dot else "") +
          f"; reads {peak['read_16KiB_GBps']:.0f} GB/s from L1 (16 KiB), {peak['read_256KiB_GBps']:.0f} "
          f"(256 KiB), {peak['read_512KiB_GBps']:.0f} (512 KiB), {peak['read_1024KiB_GBps']:.0f} "
          f"(1 MiB), {peak['read_65536KiB_GBps']:.0f} from memory (64 MiB).\n")
    if "bf16" in a.precision:
        print("At precision bf16 the LSTM stages are held to the bf16 dot-product peak and stream half "
              "the bytes.\n")
    print("| precision | threads | batch | stage | GFLOP/s | of peak | weights GB/s (batch 1) | of L2 read peak |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for (precision, threads, batch), st in stages.items():
        for name, macs in STAGE_MACS.items():
            if name not in st or st[name] <= 0:
                continue
            lstm_bf16 = precision == "bf16" and name.startswith("lstm")
            ceiling = bf16_dot if lstm_bf16 and bf16_dot else fma
            gflops = 2 * macs / (st[name] * 1e-3) / 1e9
            row = f"| {precision} | {threads} | {batch} | {name} | {gflops:.1f} | {gflops / (ceiling * threads):.0%} |"
            if name == "lstm-recurrence" and batch == 1:
                # One thread steps both directions (512 KiB of weights), two one each (256 KiB).
                l2 = peak["read_512KiB_GBps"] if threads == 1 else peak["read_256KiB_GBps"] * threads
                gbps = RECURRENT_BYTES / (2 if lstm_bf16 else 1) / (st[name] * 1e-3) / 1e9
                row += f" {gbps:.1f} | {gbps / l2:.0%} |"
            else:
                row += " | |"
            print(row)


if __name__ == "__main__":
    main()
