#!/usr/bin/env python3
"""Reference mel spectrograms and GE2E partial embeddings for the voice encoder tests.

The embeddings come from the numpy forward of scripts/models/ge2e_numpy.py with the original
(PyTorch gate order) weights read from Resemblyzer 0.1.4's pretrained.pt, not from the ONNX export,
so they check the export and the engine independently. The mel is Resemblyzer's own front end call,
librosa.feature.melspectrogram(y, sr=16000, n_fft=400, hop_length=160, n_mels=40): centred frames
(1 + samples // 160 of them) with zero padding, periodic Hann window, power 2, slaney mel scale and
normalisation, no log. Resemblyzer's preprocess_wav (volume normalisation, silence trimming) is not
applied: the clips go in as read.

Cases, each written as
  <case>.audio.npy     float32 [samples]     the clip as read (16-bit PCM / 32768, or float32 as stored)
  <case>.mel.npy       float32 [frames, 40]  the librosa mel power spectrogram
  <case>.partials.npy  float32 [n, 256]      the embedding of each 160-frame partial at mel frames
                                             [80 i, 80 i + 160), for every i with 80 i + 160 <= frames
from ../shared/data/pyannote-debug:
  sample_3_9   sample.wav from 3.0 s to 9.0 s
  dev00_0_8    dev00.wav from 0 s to 8 s
  trn00_0_4    trn00.wav, its first 4 s
Where that folder is absent, the same spans of two espeak-ng voices taking turns are used instead, as
speech_3_9, speech_0_8 and speech_0_4 (with CI=true the shared recordings are required).
manifest.txt lists the cases with their source, frame and partial counts.
"""
import argparse
import hashlib
import os
import pathlib
import sys

import librosa
import numpy as np

from make_reference import RATE, espeak_conversation, read_wav

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts" / "models"))
import ge2e_numpy  # noqa: E402

N_FFT = 400
HOP = 160
PARTIAL = 160
PARTIAL_STEP = 80
SPANS = [("sample", "sample.wav", 3.0, 9.0), ("dev00", "dev00.wav", 0.0, 8.0), ("trn00", "trn00.wav", 0.0, 4.0)]


def mel_spectrogram(clip):
    """Resemblyzer's wav_to_mel_spectrogram: [frames, 40]."""
    mel = librosa.feature.melspectrogram(y=clip, sr=RATE, n_fft=N_FFT, hop_length=HOP, n_mels=40)
    return np.ascontiguousarray(mel.astype(np.float32).T)  # C order: the tests read it so


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pt", required=True,
                    help="resemblyzer/pretrained.pt "
                         "(scripts/models/fetch_voice_model.sh extracts it)")
    ap.add_argument("--data", required=True, help="folder with sample.wav, dev00.wav and trn00.wav")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stamp")
    ap.add_argument("--synthesise", action="store_true",
                    help="use the espeak-ng recording even where the shared recordings exist")
    a = ap.parse_args()

    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    pt = pathlib.Path(a.pt)
    if not pt.is_file():
        raise SystemExit(f"{pt} not found: run scripts/models/fetch_voice_model.sh first")
    weights = ge2e_numpy.load_pretrained(pt)
    data = pathlib.Path(a.data)
    if all((data / f).is_file() for _, f, _, _ in SPANS) and not a.synthesise:
        source = "shared"
        clips = [(name, data / f, read_wav(data / f), start, end) for name, f, start, end in SPANS]
    else:
        if os.environ.get("CI") == "true" and not a.synthesise:
            raise SystemExit(f"CI=true but the shared recordings are missing ({data}): they must be tested in CI")
        if not a.synthesise:
            print(f"make_voice_reference: {data} not found; synthesising two espeak-ng voices instead", file=sys.stderr)
        source = "espeak"
        wav = out / "speech.wav"
        x = espeak_conversation(wav)
        clips = [("speech", wav, x, start, end) for _, _, start, end in SPANS]

    manifest = [f"source {source}", f"pretrained_sha256 {hashlib.sha256(pt.read_bytes()).hexdigest()}",
                f"librosa {librosa.__version__}"]
    for name, path, x, start, end in clips:
        case = f"{name}_{start:g}_{end:g}"
        clip = x[int(start * RATE):int(end * RATE)]
        mel = mel_spectrogram(clip)
        if len(mel) != 1 + len(clip) // HOP:
            raise SystemExit(f"{case}: librosa gave {len(mel)} frames, expected 1 + {len(clip)} // {HOP}")
        starts = range(0, len(mel) - PARTIAL + 1, PARTIAL_STEP)
        partials = ge2e_numpy.forward(weights, np.stack([mel[s:s + PARTIAL] for s in starts])).astype(np.float32)
        np.save(out / f"{case}.audio.npy", clip)
        np.save(out / f"{case}.mel.npy", mel)
        np.save(out / f"{case}.partials.npy", partials)
        manifest.append(f"case {case} {path.name} {start:g} {end:g} samples {len(clip)} frames {len(mel)} "
                        f"partials {len(partials)}")
        print(f"make_voice_reference: {case}: {len(clip)} samples -> mel {mel.shape} -> partials {partials.shape}",
              file=sys.stderr)
    (out / "manifest.txt").write_text("\n".join(manifest) + "\n")
    if a.stamp:
        pathlib.Path(a.stamp).write_text(source + "\n")


if __name__ == "__main__":
    main()
