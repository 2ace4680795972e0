#!/usr/bin/env bash
# From a fresh Debian 12 machine to a built project: Debian packages, the tooling virtualenv
# (.venv: ONNX Runtime and friends for references, benchmarks and evaluation; .venv-triton: the
# Triton Inference Server the remote engine is tested against; neither is used at run
# time), the models (models/segmentation-3.0.onnx, models/voice-encoder-ge2e.onnx) and the build
# (build/). Rerunning it is quick and changes nothing that is already in place.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential meson ninja-build pkg-config git ca-certificates
  libdnnl-dev libonnx-dev libprotobuf-dev libsndfile1-dev libmpg123-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev clang libfuzzer-14-dev libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc
  python3 python3-venv python3-pip espeak-ng
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-tools
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-libav
  python3-gi python3-gst-1.0 gir1.2-gstreamer-1.0 python3-numpy
  # tests/gst/check_rtsp_live.py's server (its client's rtspsrc, RTP and Opus are in -good, -base)
  gir1.2-gst-rtsp-server-1.0
  # The Debian packages' build (scripts/package/build-deb.sh, in test.sh; docs/packaging.md)
  debhelper python3-onnx chrpath
  # The jingle of the broadcast-like programmes (scripts/evaluation/programmes.py; CC BY-SA 4.0).
  yaru-theme-sound
  # Not used by the project: on most GStreamer users' machines, so the tests run beside it (they
  # must pass whatever else is installed; tests/common/gst_plugins.py).
  gstreamer1.0-plugins-bad
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's interpreter, not whatever python3 comes first on PATH: python3-venv is installed for it.
PYTHON_SYSTEM=${PYTHON_SYSTEM:-/usr/bin/python3}
# A virtualenv DIR with REQUIREMENTS installed, made again when that file changes.
make_venv() {
  local dir=$1 requirements=$2 what=$3 stamp=$1/.requirements.sha256 want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if ! [ -x "$dir/bin/python3" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: creating $dir ($what: $(grep -v '^#' "$requirements" | tr '\n' ' '))"
    "$PYTHON_SYSTEM" -m venv "$dir"
    "$dir/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    echo "$want" >"$stamp"
  fi
}
make_venv .venv requirements-tools.txt tooling
# Triton Inference Server for the remote engine's tests (scripts/servers/triton_server.py), in a virtualenv
# of its own: its wheel needs numpy < 2.
make_venv .venv-triton requirements-triton.txt "Triton Inference Server"

PYTHON=.venv/bin/python3 scripts/models/fetch_model.sh
PYTHON=.venv/bin/python3 scripts/models/fetch_voice_model.sh

if ! [ -f build/build.ninja ]; then
  meson setup build --buildtype=release
fi
meson compile -C build
echo "setup: done. Try: build/tools/speakerseg logits --input ../shared/data/pyannote-debug/sample.wav --output /tmp/logits.npy"
