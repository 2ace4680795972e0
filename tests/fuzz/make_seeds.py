#!/usr/bin/env python3
"""Seeds for the fuzz targets that derive from files the project does not commit (the fetched
models, the shared recordings): written to OUT/<target>/ next to the committed corpus
(tests/fuzz/corpus/<target>/). Deterministic.

  make_seeds.py --model M --voice-model V --recording WAV --out DIR [--stamp FILE]

fuzz_model_loader: each model with its weights emptied (the graph, every node and declared shape:
the parser and the checks before the sizes), with its graph only, and cut after 4 KiB; the first
byte chooses the loader (0: segmentation, 1: voice). fuzz_audio_file: 0.3 s of the recording as
16-bit, float and 8-bit WAV, FLAC, Ogg Vorbis, AIFF, and an MP3 (when gst-launch-1.0 has lame),
plus 8 kHz and stereo copies that must be refused."""
import argparse
import pathlib
import shutil
import subprocess

import numpy as np
import onnx
import soundfile as sf

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--voice-model", required=True)
ap.add_argument("--recording", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--stamp")
a = ap.parse_args()
out = pathlib.Path(a.out)

models = out / "fuzz_model_loader"
models.mkdir(parents=True, exist_ok=True)
for selector, path in ((0, a.model), (1, a.voice_model)):
    raw = pathlib.Path(path).read_bytes()
    (models / f"{selector}-head-4k").write_bytes(bytes([selector]) + raw[:4096])
    m = onnx.load_from_string(raw)
    for t in m.graph.initializer:
        t.raw_data = b""
        del t.float_data[:]
    (models / f"{selector}-no-weights").write_bytes(bytes([selector]) + m.SerializeToString())
    del m.graph.initializer[:]
    (models / f"{selector}-graph-only").write_bytes(bytes([selector]) + m.SerializeToString())

audio_dir = out / "fuzz_audio_file"
audio_dir.mkdir(parents=True, exist_ok=True)
audio, rate = sf.read(a.recording, dtype="float32", frames=int(0.3 * 16000))
for name, fmt, subtype, data, sr in (
        ("s16.wav", "WAV", "PCM_16", audio, 16000),
        ("f32.wav", "WAV", "FLOAT", audio, 16000),
        ("u8.wav", "WAV", "PCM_U8", audio, 16000),
        ("s16.flac", "FLAC", "PCM_16", audio, 16000),
        ("vorbis.ogg", "OGG", "VORBIS", audio, 16000),
        ("s24.aiff", "AIFF", "PCM_24", audio, 16000),
        ("8k.wav", "WAV", "PCM_16", audio[::2], 8000),
        ("stereo.wav", "WAV", "PCM_16", np.stack([audio, audio], axis=1), 16000)):
    sf.write(audio_dir / name, data, sr, format=fmt, subtype=subtype)
if shutil.which("gst-launch-1.0"):
    subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={audio_dir / 's16.wav'}", "!", "wavparse",
                    "!", "audioconvert", "!", "lamemp3enc", "!", "filesink",
                    f"location={audio_dir / 'lame.mp3'}"], check=False, capture_output=True)

if a.stamp:
    pathlib.Path(a.stamp).write_text("ok\n")
