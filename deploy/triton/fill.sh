#!/usr/bin/env bash
# Puts the networks into the Triton model repository (the .onnx files are never committed):
#
#   deploy/triton/fill.sh [DEST]
#
# copies models/segmentation-3.0.onnx and models/voice-encoder-ge2e.onnx (links followed: a
# container sees only what is mounted) to DEST/<model>/1/model.onnx, with the model's licence beside
# it as DEST/<model>/1/LICENSE.txt. DEST defaults to deploy/triton itself; another folder (e.g. on
# the inference server's disk) gets the config.pbtxt files too, so that it is a whole repository.
# MODELS_DIR overrides where the .onnx files are (default: models/ of this checkout, filled by
# scripts/models/fetch_model.sh and scripts/models/fetch_voice_model.sh, or scripts/setup.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
models=${MODELS_DIR:-$root/models}
dest=${1:-$here}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

declare -A fetcher=([segmentation-3.0]=scripts/models/fetch_model.sh
                    [voice-encoder-ge2e]=scripts/models/fetch_voice_model.sh)
for name in segmentation-3.0 voice-encoder-ge2e; do
  src=$models/$name.onnx
  if ! [ -f "$src" ]; then
    echo "fill.sh: $src is missing: run ${fetcher[$name]} (or scripts/setup.sh) first" >&2
    exit 1
  fi
  mkdir -p "$dest/$name/1"
  if [ "$dest" != "$here" ]; then
    cp "$here/$name/config.pbtxt" "$dest/$name/config.pbtxt"
  fi
  cp -L "$src" "$dest/$name/1/model.onnx"
  cp -L "$models/LICENSE-$name.txt" "$dest/$name/1/LICENSE.txt"
  echo "fill.sh: $dest/$name/1/model.onnx ($(stat -c %s "$dest/$name/1/model.onnx") bytes," \
       "sha256 $(sha256sum "$dest/$name/1/model.onnx" | cut -c1-16)...) and LICENSE.txt"
done
