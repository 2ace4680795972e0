#!/usr/bin/env bash
# Prepares .gpu-bundle/ (git-ignored) for scripts/gpu/gpu-check.sh: what a GPU machine with nvcc,
# cuDNN, a C++ compiler, ninja and Python 3, but no network and none of Debian's packages, lacks to
# build the project with meson from meson.build (the one build definition) and test the core.
#
#   deps.tar.xz  Debian 12 packages unpacked with dpkg-deb -x, trimmed to headers, libraries and
#                their pkg-config files: oneDNN, ONNX (onnx_proto), protobuf, libsndfile and the
#                codecs it links, the OpenCL loader oneDNN links, GoogleTest (static), and pkgconf
#                (meson's dependency() asks pkg-config).
#   gst.tar.xz   Debian 12's GStreamer and GLib, apart from deps.tar.xz so that only the element
#                phase puts them on the library path (the image's Python and torch never see them):
#                headers, libraries and pkg-config files to build the plugin, gst-launch-1.0 and
#                gst-inspect-1.0, the plugin scanner, and the four plugins the check's pipelines
#                use (coreelements, wavparse, audioconvert, audioresample).
#   meson-*.whl  meson, a pure-Python wheel from PyPI (MESON_VERSION).
#   data.tar.xz  models/segmentation-3.0.onnx with its licence (and its weights as an .npz for the
#                PyTorch peer, scripts/benchmarks/pyannet_torch.py), the parity tests' reference
#                tensors (build/tests/reference: ONNX Runtime's outputs on real speech) and
#                sample.wav with its licence (the benchmark's windows).
#   MANIFEST.txt package versions, checksums and sizes.
#
# Run here (Debian 12, after scripts/setup.sh); it runs apt-get download for the packages whose
# .deb is not in apt's cache. The whole bundle must stay under 64 MiB, the most a device run carries;
# the script fails if it does not. Usage: scripts/gpu/gpu-bundle.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

OUT=${1:-.gpu-bundle}
LIMIT_MIB=64
PACKAGES=(
  libdnnl-dev libdnnl2 ocl-icd-libopencl1
  libonnx-dev libonnx1
  libprotobuf-dev libprotobuf32
  libsndfile1-dev libsndfile1 libflac12 libvorbis0a libvorbisenc2 libopus0 libogg0 libmpg123-0
  libmpg123-dev
  libmp3lame0
  libgtest-dev
  nlohmann-json3-dev
  pkgconf-bin libpkgconf3
)
GST_PACKAGES=(
  libglib2.0-0 libglib2.0-dev libffi8 libpcre2-8-0
  libgstreamer1.0-0 libgstreamer1.0-dev libunwind8 libdw1 libelf1
  libgstreamer-plugins-base1.0-0 libgstreamer-plugins-base1.0-dev gstreamer1.0-plugins-base
  liborc-0.4-0 gstreamer1.0-plugins-good gstreamer1.0-tools
)
GST_PLUGINS=(libgstcoreelements.so libgstwavparse.so libgstaudioconvert.so libgstaudioresample.so)
# Newer than Debian 12's meson 1.0.1, which predates the GPU machine's Python 3.12; runs on 3.7 to
# 3.13. The build definition is the same: CI builds the GPU check's way with this wheel too.
MESON_VERSION=1.6.1
MODEL=models/segmentation-3.0.onnx
VOICE_MODEL=models/voice-encoder-ge2e.onnx
REFERENCE=build/tests/reference
VOICE_REFERENCE=build/tests/reference-voice
SAMPLE_DIR=../shared/data/pyannote-debug

say() { printf 'gpu-bundle: %s\n' "$*"; }
die() {
  say "error: $*" >&2
  exit 1
}

[ -f "$MODEL" ] || die "$MODEL is missing: run scripts/setup.sh first"
[ -f "$VOICE_MODEL" ] || die "$VOICE_MODEL is missing: run scripts/setup.sh first"
if ! [ -f "$VOICE_REFERENCE/manifest.txt" ]; then
  say "building the voice encoder's reference ($VOICE_REFERENCE)"
  ninja -C build tests/reference-voice.stamp >/dev/null
fi
[ -f "$SAMPLE_DIR/sample.wav" ] || die "$SAMPLE_DIR/sample.wav is missing (the benchmark's audio)"
if ! [ -f "$REFERENCE/batch32.logprobs.npy" ]; then
  say "building the reference tensors ($REFERENCE)"
  ninja -C build tests/reference.stamp >/dev/null
fi
grep -q '^source shared' "$REFERENCE/manifest.txt" ||
  die "$REFERENCE was made from synthesised speech; the GPU check wants the real recordings"

# Two cores make the compression take half as long (CI runs this script too).
export XZ_OPT=${XZ_OPT:--T0}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/debs" "$stage/gst-debs" "$stage/root" "$stage/gst" "$stage/data"
chmod a+rx "$stage" "$stage/debs" "$stage/gst-debs"  # apt-get download drops privileges to _apt

# The installed version of each package where there is one, so that the bundle matches what this
# machine builds and tests against; apt's cache first, apt-get download otherwise.
versions=()
fetch() {  # fetch DIR PACKAGE...
  local dir=$1 p v file
  shift
  for p in "$@"; do
    v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)
    [ -n "$v" ] || die "$p is not installed: run scripts/setup.sh (or apt-get install $p) first"
    versions+=("$p $v")
    file=$(ls /var/cache/apt/archives/"${p}"_"${v//:/%3a}"_*.deb 2>/dev/null | head -n 1 || true)
    if [ -n "$file" ]; then
      cp "$file" "$dir/"
    else
      (cd "$dir" && apt-get download -qq "$p=$v" >/dev/null) ||
        die "apt-get download $p=$v failed (run apt-get update?)"
    fi
  done
}
fetch "$stage/debs" "${PACKAGES[@]}"
fetch "$stage/gst-debs" "${GST_PACKAGES[@]}"
for deb in "$stage"/debs/*.deb; do dpkg-deb -x "$deb" "$stage/root"; done
for deb in "$stage"/gst-debs/*.deb; do dpkg-deb -x "$deb" "$stage/gst"; done

# Headers, libraries, their pkg-config files and pkgconf: no documentation, no CMake files, no
# unused ONNX library.
lib=usr/lib/x86_64-linux-gnu
keep=(usr/include usr/bin/pkgconf usr/share/pkgconfig)
for f in "$stage/root/$lib"/*; do
  case "$(basename "$f")" in
    libonnx.so* | libonnxifi* | *.cmake | cmake) ;;
    *.so* | libgtest.a | libgtest_main.a | pkgconfig) keep+=("$lib/$(basename "$f")") ;;
  esac
done
mkdir -p "$OUT"
tar -C "$stage/root" -cJf "$OUT/deps.tar.xz" "${keep[@]}"

# GStreamer: headers, libraries, pkg-config files, the tools, the scanner, four plugins.
keep=(usr/include usr/bin/gst-launch-1.0 usr/bin/gst-inspect-1.0 "$lib/glib-2.0"
  "$lib/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner")
for f in "$stage/gst/$lib"/*.so* "$stage/gst/$lib"/pkgconfig; do keep+=("$lib/$(basename "$f")"); done
for f in "${GST_PLUGINS[@]}"; do
  [ -f "$stage/gst/$lib/gstreamer-1.0/$f" ] || die "$f is not in ${GST_PACKAGES[*]}"
  keep+=("$lib/gstreamer-1.0/$f")
done
tar -C "$stage/gst" -cJf "$OUT/gst.tar.xz" "${keep[@]}"

wheel=meson-$MESON_VERSION-py3-none-any.whl
rm -f $(ls "$OUT"/meson-*.whl 2>/dev/null | grep -v -F "/$wheel")
if ! [ -f "$OUT/$wheel" ]; then
  .venv/bin/python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: "meson==$MESON_VERSION" -d "$OUT" >/dev/null ||
    die "pip download meson==$MESON_VERSION failed (PyPI unreachable?)"
fi

mkdir -p "$stage/data/model" "$stage/data/reference" "$stage/data/reference-voice" "$stage/data/audio"
cp "$MODEL" models/LICENSE-segmentation-3.0.txt "$stage/data/model/"
# The same weights for the GPU check's PyTorch peer, where the onnx package may be missing.
.venv/bin/python3 scripts/benchmarks/pyannet_torch.py --model "$MODEL" \
  --export-weights "$stage/data/model/pyannet-weights.npz"
cp "$VOICE_MODEL" models/LICENSE-voice-encoder-ge2e.txt "$stage/data/model/"
cp "$VOICE_REFERENCE"/*.npy "$VOICE_REFERENCE/manifest.txt" "$stage/data/reference-voice/"
cp "$REFERENCE"/*.npy "$REFERENCE"/*.onnx "$REFERENCE/manifest.txt" "$stage/data/reference/"
cp "$SAMPLE_DIR/sample.wav" "$stage/data/audio/"
cp "$SAMPLE_DIR"/LICENSE* "$stage/data/audio/" 2>/dev/null || true
tar -C "$stage/data" -cJf "$OUT/data.tar.xz" model reference reference-voice audio

{
  echo "speakerseg GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "packages (Debian, unpacked with dpkg-deb -x):"
  printf '  %s\n' "${versions[@]}"
  echo "reference: $(tr '\n' ';' <"$REFERENCE/manifest.txt")"
  echo "meson: $MESON_VERSION (PyPI wheel)"
  (cd "$OUT" && sha256sum deps.tar.xz gst.tar.xz data.tar.xz "$wheel")
} >"$OUT/MANIFEST.txt"

total=$(du -cb "$OUT"/deps.tar.xz "$OUT"/gst.tar.xz "$OUT"/data.tar.xz "$OUT/$wheel" \
  "$OUT"/MANIFEST.txt | tail -n 1 | cut -f1)
say "$(du -h "$OUT/deps.tar.xz" | cut -f1) deps.tar.xz, $(du -h "$OUT/gst.tar.xz" | cut -f1) gst.tar.xz," \
  "$(du -h "$OUT/data.tar.xz" | cut -f1) data.tar.xz," \
  "$(du -h "$OUT/$wheel" | cut -f1) $wheel:" \
  "$((total / 1048576)) MiB in $OUT"
[ "$total" -lt $((LIMIT_MIB * 1048576)) ] || die "the bundle is over $LIMIT_MIB MiB"
