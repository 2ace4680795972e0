#!/usr/bin/env bash
# Puts Resemblyzer 0.1.4's GE2E voice encoder (Apache-2.0) at models/voice-encoder-ge2e.onnx, checked
# by sha256, with its licence at models/LICENSE-voice-encoder-ge2e.txt.
#
# Source: the PyPI wheel resemblyzer==0.1.4 (sha256 as PyPI publishes it), members
# resemblyzer/pretrained.pt (PyTorch weights) and Resemblyzer-0.1.4.dist-info/LICENSE, both kept
# under models/.cache/resemblyzer/ (tests/reference/make_voice_reference.py reads pretrained.pt there).
# scripts/models/convert_voice_model.py turns the weights into ONNX without torch; its output is
# byte-identical for the same weights, hence the pinned model checksum.
# Idempotent: does nothing when every file is present and its checksum matches.
set -euo pipefail
cd "$(dirname "$0")/../.."

MODEL=models/voice-encoder-ge2e.onnx
MODEL_SHA256=b3aa8fbe922ddec5fbbb7f5d438ae82cabaf4ed65f18d78eaa356e19804591aa
LICENCE=models/LICENSE-voice-encoder-ge2e.txt
WHEEL=Resemblyzer-0.1.4-py3-none-any.whl
WHEEL_SHA256=8f12eb2f1a9982d32e8db7856de754709b59c93a77bcf0ff536584b619a9dd1f
PT_MEMBER=resemblyzer/pretrained.pt
PT_SHA256=39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e
LICENCE_MEMBER=Resemblyzer-0.1.4.dist-info/LICENSE
LICENCE_SHA256=835cbdc5bdc6c60fae874e544e7d5ba648d77d25ec72e4c2efc26b5fde0862c3
PYTHON=${PYTHON:-.venv/bin/python3}

cache=models/.cache
PT=$cache/resemblyzer/pretrained.pt
CACHED_LICENCE=$cache/resemblyzer/LICENSE

check() { [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status; }

if check "$MODEL" "$MODEL_SHA256" && check "$LICENCE" "$LICENCE_SHA256" && check "$PT" "$PT_SHA256"; then
  echo "fetch_voice_model: $MODEL present (sha256 ok)"
  exit 0
fi

mkdir -p "$cache/resemblyzer"
if ! check "$PT" "$PT_SHA256" || ! check "$CACHED_LICENCE" "$LICENCE_SHA256"; then
  if ! check "$cache/$WHEEL" "$WHEEL_SHA256"; then
    echo "fetch_voice_model: downloading $WHEEL from PyPI"
    rm -f "$cache/$WHEEL"
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --dest "$cache" resemblyzer==0.1.4
    check "$cache/$WHEEL" "$WHEEL_SHA256" || {
      echo "fetch_voice_model: $cache/$WHEEL does not have the expected sha256 $WHEEL_SHA256" >&2
      exit 1
    }
  fi
  # A wheel is a zip; python's zipfile spares a dependency on unzip.
  "$PYTHON" - "$cache/$WHEEL" "$PT_MEMBER" "$PT" "$LICENCE_MEMBER" "$CACHED_LICENCE" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for member, dest in zip(sys.argv[2::2], sys.argv[3::2]):
        with z.open(member) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)
EOF
  check "$PT" "$PT_SHA256" || {
    echo "fetch_voice_model: extracted $PT_MEMBER does not have the expected sha256 $PT_SHA256" >&2
    exit 1
  }
  check "$CACHED_LICENCE" "$LICENCE_SHA256" || {
    echo "fetch_voice_model: extracted $LICENCE_MEMBER does not have the expected sha256 $LICENCE_SHA256" >&2
    exit 1
  }
fi

if ! check "$MODEL" "$MODEL_SHA256"; then
  # Converted inside the (ignored) cache, then moved into place once its checksum holds.
  converted=$cache/voice-encoder-ge2e.onnx
  "$PYTHON" scripts/models/convert_voice_model.py "$PT" "$converted"
  check "$converted" "$MODEL_SHA256" || {
    echo "fetch_voice_model: converted model does not have the expected sha256 $MODEL_SHA256" >&2
    rm -f "$converted"
    exit 1
  }
  mv "$converted" "$MODEL"
fi
check "$LICENCE" "$LICENCE_SHA256" || cp "$CACHED_LICENCE" "$LICENCE"
echo "fetch_voice_model: $MODEL installed (sha256 $MODEL_SHA256); licence: $LICENCE"
