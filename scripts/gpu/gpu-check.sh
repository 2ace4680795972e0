#!/usr/bin/env bash
# The GPU check, one command: on a Linux x86-64 machine with an NVIDIA GPU, nvcc 13, cuDNN 9 (the
# nvidia-cudnn-cu13 wheel will do), a C++ compiler, ninja and Python 3, with no network and none of
# Debian's packages, it
#   1. prints the GPU, driver, CUDA, cuDNN and NVRTC versions, before anything else;
#   2. unpacks .gpu-bundle/ (made here by scripts/gpu/gpu-bundle.sh) and builds the project with
#      meson from meson.build, as every build is made (-Dcuda=enabled: a build that cannot find the
#      CUDA libraries fails instead of quietly leaving the engine out; -Dgst=disabled);
#   then, in order of value, each phase in its own time slice and never past GPU_CHECK_BUDGET
#   seconds from the start (what does not fit is skipped and named):
#   tests       the host suites (meson suite gpu-host), test_cuda_engine (ONNX Runtime parity of
#               every algorithm, graphs off and on, stage by stage against the host pass; replays
#               that differ are reported, and the suite runs again with CUBLAS_WORKSPACE_CONFIG),
#               test_cuda_voice_encoder (GE2E against the original weights);
#   live        3 000 live channels on one shared CUDA engine, one batch and two batches in
#               flight (speakerseg live --in-flight), and two with streams' audio kept on the
#               device (--device-audio);
#   table       per-forward median and p99, windows/s, engine start-up, batch 1, 8, 32, 128, 512 x
#               each LSTM algorithm, graphs on, and the CPU engine on the same windows;
#   peer        pyannote's PyanNet in PyTorch (scripts/benchmarks/pyannet_torch.py, the image's
#               torch) on the same windows: parity, fp32/default/graph/fp16 rows, ours / PyTorch;
#   element     the plugin built against the bundle's GStreamer (gst.tar.xz), sample.wav through
#               speakerchange engine=cpu and engine=cuda (the same changes within two frames),
#               and two elements in one process sharing one CUDA engine;
#   voice       the voice encoder's partials/s, CPU and GPU, at 1, 32 and 256 partials;
#   sanitizer   compute-sanitizer memcheck, then initcheck, on a few GPU tests;
#   long-table  batches 2, 4, 16, 64, 256 graphs on, every batch graphs off, 5 000 live channels
#               with two batches in flight, whole windows and kept on the device, and with
#               identity by voice on (--reidentify --stitch-threads 8);
#   and last the fastest LSTM algorithm per batch among the rows that ran (the `auto` thresholds).
# Everything printed also goes to $GPU_CHECK_OUT/gpu-check.txt as it is printed, and the logs (test,
# build, sanitizer) are packed into $GPU_CHECK_OUT/gpu-check-logs.tar.gz after every phase and at
# exit, so that a run stopped at its limit still brings back what it found.
#
# Usage: scripts/gpu/gpu-check.sh [--build-only]
#   --build-only  no GPU needed: build and run the tests (the GPU ones skip), nothing else. CI runs
#                 this (scripts/test.sh), so that what would break the GPU run breaks CI.
# Exit: 0 all tests passed; 1 a build or test failure; 77 no NVIDIA GPU (nothing checked).
# Environment:
#   GPU_BUNDLE        the bundle (default .gpu-bundle)
#   GPU_CHECK_DIR     build and scratch folder (default build-gpu-check in the checkout, so that a
#                     second run on the same machine only rebuilds what changed)
#   GPU_CHECK_OUT     where gpu-check.txt and gpu-check-logs.tar.gz go (default GPU_CHECK_DIR/results;
#                     on the device tool: $OUT)
#   GPU_CHECK_BUDGET  seconds for the whole run, build included (default 300)
#   GPU_CHECK_PHASES  which phases run (default "tests live table peer element voice sanitizer
#                     long-table"); a
#                     rerun of what a first run skipped names only those
#   GPU_CHECK_ROW_TIMEOUT  at most this many seconds per benchmark row (default 60)
#   CUDNN_ROOT / CUDA_HOME  where cuDNN or the toolkit are, where the search below misses them
set -uo pipefail
cd "$(dirname "$0")/../.."
SRC=$PWD
BUNDLE=$(realpath -m "${GPU_BUNDLE:-.gpu-bundle}")
WORK=$(realpath -m "${GPU_CHECK_DIR:-build-gpu-check}")
RESULTS=$(realpath -m "${GPU_CHECK_OUT:-$WORK/results}")
BUDGET=${GPU_CHECK_BUDGET:-300}
PHASES=" ${GPU_CHECK_PHASES:-tests live table peer element voice sanitizer long-table} "
ROW_TIMEOUT=${GPU_CHECK_ROW_TIMEOUT:-60}
BUILD_ONLY=0
# --build-only has no budget: its tests must run however long a slow machine takes to build.
[ "${1:-}" = "--build-only" ] && BUILD_ONLY=1 && PHASES=" tests " && BUDGET=1000000
T0=$SECONDS
BUILD=$WORK/build
LOGS=$WORK/logs
mkdir -p "$LOGS" "$RESULTS" || exit 1
rm -f "$RESULTS/gpu-check.txt"
exec > >(tee -a "$RESULTS/gpu-check.txt") 2>&1

say() { printf 'gpu-check: %s\n' "$*"; }
die() {
  say "error: $*"
  exit 1
}
pack_logs() {
  tar -czf "$RESULTS/gpu-check-logs.tar.gz.part" -C "$WORK" logs \
    $([ -d "$BUILD/meson-logs" ] && echo build/meson-logs) 2>/dev/null &&
    mv "$RESULTS/gpu-check-logs.tar.gz.part" "$RESULTS/gpu-check-logs.tar.gz"
}
trap pack_logs EXIT
trap 'say "stopped by a signal after $((SECONDS - T0)) s"; exit 143' TERM INT

# --- The time slices ---------------------------------------------------------------------------
skipped=()
left() { echo $((BUDGET - (SECONDS - T0))); }
# begin NAME SLICE MIN: starts phase NAME with at most SLICE seconds (less where the budget has
# less left); fails, saying why, when the phase is not asked for or less than MIN seconds are left.
begin() {
  local name=$1 slice=$2 min=$3 l
  [[ $PHASES == *" $name "* ]] || return 1
  l=$(left)
  if [ "$l" -lt "$min" ]; then
    say "$name: skipped ($l s of the $BUDGET s budget left, it needs $min; GPU_CHECK_PHASES=$name reruns it)"
    skipped+=("$name")
    return 1
  fi
  PHASE=$name
  PHASE_START=$SECONDS
  PHASE_END=$((SECONDS + (slice < l ? slice : l)))
  echo "=== $name (at most $((PHASE_END - SECONDS)) s; $((SECONDS - T0)) s into the run)"
}
remaining() { echo $((PHASE_END - SECONDS)); }  # seconds the phase has left
end_phase() {
  say "$PHASE: $((SECONDS - PHASE_START)) s"
  pack_logs
}
count() { grep -c "$1" "$2"; }  # count PATTERN LOG
# Only a test's own result line ends in its time: gtest lists each failed test again at the end,
# and for a parameterised one that line has "(...)" too (its GetParam()), which counted it twice.
gtest_counts() {                 # gtest_counts LOG: "N passed, N failed, N skipped"
  echo "$(count '^\[       OK \] .* ([0-9]* ms)$' "$1") passed," \
    "$(count '^\[  FAILED  \] .* ([0-9]* ms)$' "$1") failed," \
    "$(count '^\[  SKIPPED \] .* ([0-9]* ms)$' "$1") skipped"
}

# --- 1. The machine --------------------------------------------------------------------------

gpus=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total \
    --format=csv,noheader 2>&1) || gpus=""
fi
if [ -z "$gpus" ] && [ $BUILD_ONLY = 0 ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    why="nvidia-smi lists none: $(nvidia-smi -L 2>&1 | head -n 1)"
  else
    why="nvidia-smi is not installed"
  fi
  say "no NVIDIA GPU ($why): nothing to check."
  say "(scripts/gpu/gpu-check.sh --build-only builds and runs the tests, which skip without a GPU)"
  exit 77
fi

# Where a library is: the toolkit next to nvcc, CUDA_HOME, the pip wheels (nvidia/cu13/lib,
# nvidia/cudnn/lib), ld.so's cache, then a bounded search.
NVCC=$(command -v nvcc || true)
[ -n "$NVCC" ] || for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-13*; do
  [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && NVCC=$d/bin/nvcc && break
done
[ -n "$NVCC" ] || die "nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)"
NVCC_ROOT=$(dirname "$(dirname "$(realpath "$NVCC")")")
export PATH=$(dirname "$NVCC"):$PATH  # meson looks for nvcc on PATH
PYTHON=$(command -v python3 || true)
[ -n "$PYTHON" ] || die "python3 not found (meson runs on it)"
site_dirs=$(for py in python3 /opt/*/.venv/bin/python3 /usr/bin/python3; do
  command -v "$py" >/dev/null 2>&1 &&
    "$py" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
done | sort -u)
search_dirs=()
for d in "${CUDNN_ROOT:-}" "${CUDA_HOME:-}" "$NVCC_ROOT" "$NVCC_ROOT/targets/x86_64-linux" /usr/local/cuda; do
  [ -n "$d" ] && search_dirs+=("$d/lib64" "$d/lib")
done
for s in $site_dirs; do
  for d in "$s"/nvidia/*/lib; do [ -d "$d" ] && search_dirs+=("$d"); done
done
search_dirs+=(/usr/lib/x86_64-linux-gnu /usr/local/lib)
find_lib() {  # find_lib libname.so.N: prints the file's path
  local d
  for d in "${search_dirs[@]}"; do
    [ -e "$d/$1" ] && realpath -s "$d/$1" && return 0
  done
  local hit
  hit=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n {print $NF; exit}')
  [ -n "$hit" ] && echo "$hit" && return 0
  hit=$(find /usr/local /opt /usr/lib /root -maxdepth 8 -name "$1" 2>/dev/null | head -n 1)
  [ -n "$hit" ] && echo "$hit"
}
find_header() {  # find_header cudnn.h LIBPATH: the include folder beside a library folder
  local d base
  base=$(dirname "$(dirname "$2")")
  for d in "$base/include" "$NVCC_ROOT/include" "$NVCC_ROOT/targets/x86_64-linux/include" \
    /usr/local/cuda/include /usr/include; do
    [ -f "$d/$1" ] && echo "$d" && return 0
  done
  return 1
}
CUDART=$(find_lib libcudart.so.13)
CUBLAS=$(find_lib libcublas.so.13)
CUDNN=$(find_lib libcudnn.so.9)
NVRTC=$(find_lib libnvrtc.so.13)
# cuDNN compiles persist-dynamic with NVRTC when the engine is made: without it that algorithm's
# tests and rows can only fail, which says nothing about the engine. They are left out, loudly.
NO_NVRTC_FILTER=""
if [ -z "$NVRTC" ]; then
  say "WARNING: libnvrtc.so.13 not found (toolkit, CUDA_HOME, nvidia/cu13 wheels, ld.so cache):"
  say "  cuDNN cannot build lstm-algorithm persist-dynamic; its tests and benchmark rows are"
  say "  skipped and persist-dynamic is NOT checked. Install the nvidia-cuda-nvrtc wheel or the"
  say "  toolkit's NVRTC and run again."
  NO_NVRTC_FILTER="*persist_dynamic*"
fi
[ -n "$CUDART" ] || die "libcudart.so.13 not found"
[ -n "$CUBLAS" ] || die "libcublas.so.13 not found"
[ -n "$CUDNN" ] || die "libcudnn.so.9 not found (set CUDNN_ROOT to the cuDNN folder, e.g. .../site-packages/nvidia/cudnn)"
CUDNN_INC=$(find_header cudnn.h "$CUDNN") || die "cudnn.h not found beside $CUDNN"
CUDA_INC=$(find_header cuda_runtime_api.h "$CUDART") || die "cuda_runtime_api.h not found"
CUBLAS_INC=$(find_header cublas_v2.h "$CUBLAS") || die "cublas_v2.h not found"
lib_path=$(printf '%s\n' "$(dirname "$CUDART")" "$(dirname "$CUBLAS")" "$(dirname "$CUDNN")" \
  ${NVRTC:+"$(dirname "$NVRTC")"} | awk '!seen[$0]++' | paste -sd:)
# cuDNN dlopens NVRTC (persist-dynamic) and its own sub-libraries: LD_LIBRARY_PATH, not rpath.
export LD_LIBRARY_PATH=$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# What meson's find_library needs (meson.build, option gpu_prefixes): one prefix whose lib/ has
# the unversioned names (the wheels ship libcudnn.so.9 alone) and whose include/ has the headers.
GPU_LIBS=$WORK/gpu-libs
rm -rf "$GPU_LIBS"
mkdir -p "$GPU_LIBS/lib" "$GPU_LIBS/include"
ln -s "$CUDART" "$GPU_LIBS/lib/libcudart.so"
ln -s "$CUBLAS" "$GPU_LIBS/lib/libcublas.so"
ln -s "$CUDNN" "$GPU_LIBS/lib/libcudnn.so"
for d in $(printf '%s\n' "$CUDNN_INC" "$CUDA_INC" "$CUBLAS_INC" | awk '!seen[$0]++'); do
  for f in "$d"/*; do
    [ -e "$GPU_LIBS/include/$(basename "$f")" ] || ln -s "$f" "$GPU_LIBS/include/"
  done
done

cat >"$WORK/versions.cpp" <<'EOF'
// Versions of what this process actually loads, through the same dynamic loader cuDNN uses.
#include <dlfcn.h>
#include <cstdio>
template <class F>
F sym(const char* lib, const char* name) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  return h ? reinterpret_cast<F>(dlsym(h, name)) : nullptr;
}
int main(int, char** argv) {
  int v = 0, a = 0, b = 0;
  auto drv = sym<int (*)(int*)>("libcuda.so.1", "cuDriverGetVersion");
  if (drv && drv(&v) == 0) std::printf("CUDA driver API: %d.%d\n", v / 1000, v % 1000 / 10);
  auto rt = sym<int (*)(int*)>(argv[1], "cudaRuntimeGetVersion");
  if (rt && rt(&v) == 0) std::printf("CUDA runtime: %d.%d (%s)\n", v / 1000, v % 1000 / 10, argv[1]);
  auto dnn = sym<size_t (*)()>(argv[2], "cudnnGetVersion");
  if (dnn) {
    const size_t c = dnn();
    std::printf("cuDNN: %zu.%zu.%zu (%s)\n", c / 10000, c / 100 % 100, c % 100, argv[2]);
  } else {
    std::printf("cuDNN: cannot load %s: %s\n", argv[2], dlerror());
  }
  auto rtc = sym<int (*)(int*, int*)>("libnvrtc.so.13", "nvrtcVersion");
  if (rtc && rtc(&a, &b) == 0)
    std::printf("NVRTC: %d.%d (libnvrtc.so.13)\n", a, b);
  else
    std::printf("NVRTC: not loadable (%s): persist-dynamic cannot work\n", dlerror());
  return 0;
}
EOF
CXX=${CXX:-c++}
command -v "$CXX" >/dev/null 2>&1 || die "no C++ compiler ($CXX)"
echo "=== machine"
if [ -n "$gpus" ]; then
  echo "$gpus" | sed 's/^/GPU /'
else
  echo "GPU: none (--build-only)"
fi
echo "nvcc: $("$NVCC" --version | grep -o 'release [^,]*, V[0-9.]*')  ($NVCC)"
echo "host compiler: $("$CXX" --version | head -n 1)"
echo "python: $("$PYTHON" --version 2>&1) ($PYTHON)"
if "$CXX" -O0 -o "$WORK/versions" "$WORK/versions.cpp" -ldl 2>"$LOGS/versions.log"; then
  "$WORK/versions" "$CUDART" "$CUDNN"
else
  echo "(version probe did not build: $(head -n 1 "$LOGS/versions.log"))"
fi
echo "libraries: $CUDART $CUBLAS $CUDNN ${NVRTC:-(no libnvrtc.so.13)}"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"

# --- 2. Build: meson, from meson.build ---------------------------------------------------------

wheel=$(ls "$BUNDLE"/meson-*-py3-none-any.whl 2>/dev/null | head -n 1)
[ -f "$BUNDLE/deps.tar.xz" ] && [ -f "$BUNDLE/data.tar.xz" ] && [ -n "$wheel" ] ||
  die "$BUNDLE/deps.tar.xz, data.tar.xz or the meson wheel is missing:" \
      "run scripts/gpu/gpu-bundle.sh where the Debian packages are"
echo "=== build (in $BUILD)"
start_build=$SECONDS
DEPS=$WORK/deps
DATA=$WORK/data
DLIB=$DEPS/usr/lib/x86_64-linux-gnu
# Unpacked once per bundle: a second run on the same machine keeps the build.
if ! cmp -s "$BUNDLE/MANIFEST.txt" "$WORK/MANIFEST.txt"; then
  rm -rf "$DEPS" "$DATA" "$WORK/gst" "$WORK/meson" "$WORK/MANIFEST.txt"
  # Python's tarfile and zipfile: the image may have neither xz nor unzip.
  "$PYTHON" - "$BUNDLE" "$WORK" "$wheel" <<'PY' || die "cannot unpack $BUNDLE"
import os, sys, tarfile, zipfile
bundle, work, wheel = sys.argv[1:]
for name, to in (("deps", "deps"), ("data", "data"), ("gst", "gst")):
    if os.path.exists(f"{bundle}/{name}.tar.xz"):  # gst: bundles before session 23 have none
        with tarfile.open(f"{bundle}/{name}.tar.xz") as t:
            t.extractall(f"{work}/{to}")
zipfile.ZipFile(wheel).extractall(f"{work}/meson")
PY
  # The packages' pkg-config files name /usr: here they are under $DEPS. Only shared libraries
  # are linked, so the private requirements (the codecs' -dev packages, not bundled) are dropped.
  for pc in "$DLIB"/pkgconfig/*.pc "$DEPS"/usr/share/pkgconfig/*.pc; do
    sed -i -e "s#=/usr#=$DEPS/usr#" -e "s#-I/usr/include#-I$DEPS/usr/include#g" \
      -e '/^Requires.private:/d' "$pc"
  done
  for pc in "$WORK"/gst/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i -e "s#=/usr#=$WORK/gst/usr#" \
      -e "s#-I/usr/include#-I$WORK/gst/usr/include#g" -e '/^Requires.private:/d' "$pc"
  done
  printf 'from mesonbuild import mesonmain\nimport sys\nsys.exit(mesonmain.main())\n' \
    >"$WORK/meson/meson.py"
  cp "$BUNDLE/MANIFEST.txt" "$WORK/MANIFEST.txt"
fi
MESON=("$PYTHON" "$WORK/meson/meson.py")
export PKG_CONFIG=$DEPS/usr/bin/pkgconf
export PKG_CONFIG_LIBDIR=$DLIB/pkgconfig:$DEPS/usr/share/pkgconfig
export CPATH=$DEPS/usr/include:$DEPS/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}
export LIBRARY_PATH=$DLIB${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$DLIB:$LD_LIBRARY_PATH
echo "meson: $("${MESON[@]}" --version), ninja: $(ninja --version 2>/dev/null || echo 'not found')"
setup_args=(--buildtype=release -Dcuda=enabled -Dgst=disabled -Dtests=true
  -Dgpu_prefixes="$GPU_LIBS" -Dmodel="$DATA/model/segmentation-3.0.onnx"
  -Dvoice_model="$DATA/model/voice-encoder-ge2e.onnx" -Dshared_data="$DATA/audio"
  -Dreference_data="$DATA")
reconfigure=()
[ -f "$BUILD/build.ninja" ] && reconfigure=(--reconfigure)
if ! "${MESON[@]}" setup "${reconfigure[@]}" "$BUILD" "${setup_args[@]}" >"$LOGS/meson-setup.log" 2>&1; then
  tail -n 30 "$LOGS/meson-setup.log"
  die "meson setup failed (log: $LOGS/meson-setup.log)"
fi
sed -n '/^  speakerchange$/,/^$/p' "$LOGS/meson-setup.log" | grep -E '(CUDA engine|tests) *:'
if ! "${MESON[@]}" compile -C "$BUILD" >"$LOGS/build.log" 2>&1; then
  grep -E -B2 -A8 'error|FAILED' "$LOGS/build.log" | head -n 60
  die "the build failed (log: $LOGS/build.log)"
fi
grep -i -B2 -A4 'warning:' "$LOGS/build.log" | head -n 40
say "built in $((SECONDS - start_build)) s"
pack_logs
SPEAKERSEG=$BUILD/tools/speakerseg

# --- 3. Tests ----------------------------------------------------------------------------------

# mtest LOG SECONDS ARGS...: `meson test` on the build (its environment: the model, the bundle's
# reference tensors), output in LOG.
mtest() {
  local log=$1 seconds=$2
  shift 2
  timeout -k 10 "$seconds" "${MESON[@]}" test -C "$BUILD" --no-rebuild --verbose "$@" >"$log" 2>&1
}
filter=()
[ -n "$NO_NVRTC_FILTER" ] && filter=("--test-args=--gtest_filter=-$NO_NVRTC_FILTER")
test_rc=0
# engine_tests LOG [LABEL]: test_cuda_engine, and what it found (variables set before the call,
# CUBLAS_WORKSPACE_CONFIG=... engine_tests LOG, reach the tests).
engine_tests() {
  local log=$1 rc
  shift
  [ "$(remaining)" -gt 10 ] || {
    say "test_cuda_engine${1:+ with $*}: no time left in the tests' slice"
    return 1
  }
  mtest "$log" "$(remaining)" cuda_engine "${filter[@]}"
  rc=$?
  grep -E '^\[ (cuda|cuda tf32|cuda fp16|warning|stage) ' "$log"
  grep -E '^(GPU|CUDA|cuBLAS|cuDNN|NVRTC)' "$log" | sort -u
  grep -E -A12 '^\[  FAILED  \]|Failure$' "$log" | head -n 80
  grep -m1 'Skipped' -A1 "$log" | tail -n 1 | sed 's/^/skip reason: /'
  [ $rc = 124 ] && say "test_cuda_engine: stopped at the end of the tests' slice"
  say "test_cuda_engine${1:+ with $*}: $(gtest_counts "$log");" \
    "replays: $(count '^\[ replays \] .*bit-identical' "$log") bit-identical," \
    "$(count '^\[ replays \] .*DIFFER' "$log") differ (log: $log)"
  return $rc
}
tests_slice=110
[ $BUILD_ONLY = 1 ] && tests_slice=1200
if begin tests $tests_slice 20; then
  # The engine's host side and the CPU LSTM kernel (these machines' CPUs may run its AVX-512
  # paths, which the project's own may not).
  echo "--- host suites (meson suite gpu-host; $(grep -o -m1 -w 'avx512f' /proc/cpuinfo || echo 'no avx512f') on this CPU)"
  mtest "$LOGS/gpu-host.log" 60 --suite gpu-host || test_rc=1
  say "host suites: $(gtest_counts "$LOGS/gpu-host.log")"
  grep -E -A12 '^\[  FAILED  \]|Failure$' "$LOGS/gpu-host.log" | head -n 40
  echo "--- test_cuda_engine"
  engine_tests "$LOGS/cuda_engine.log" || test_rc=1
  # Replays that differ are reported, not failed: cuBLAS may pick split-K reductions whose order
  # depends on its workspace. Again with a fixed workspace configuration, to tell that from ours.
  if grep -q '^\[ replays \] .*DIFFER' "$LOGS/cuda_engine.log"; then
    grep '^\[ replays \] .*DIFFER' "$LOGS/cuda_engine.log" | head -n 20
    echo "--- test_cuda_engine again with CUBLAS_WORKSPACE_CONFIG=:4096:2 (replays differed)"
    CUBLAS_WORKSPACE_CONFIG=:4096:2 engine_tests "$LOGS/cuda_engine-cublas-workspace.log" \
      CUBLAS_WORKSPACE_CONFIG=:4096:2
    grep '^\[ replays \] .*DIFFER' "$LOGS/cuda_engine-cublas-workspace.log" | head -n 20
  fi
  echo "--- test_cuda_voice_encoder"
  if [ "$(remaining)" -gt 5 ]; then
    mtest "$LOGS/cuda_voice_encoder.log" "$(remaining)" cuda_voice_encoder "${filter[@]}" || test_rc=1
    grep -E '^\[ (cuda voice|warning|replays) ' "$LOGS/cuda_voice_encoder.log" | head -n 80
    grep -E -A12 '^\[  FAILED  \]|Failure$' "$LOGS/cuda_voice_encoder.log" | head -n 60
    say "test_cuda_voice_encoder: $(gtest_counts "$LOGS/cuda_voice_encoder.log") (log: $LOGS/cuda_voice_encoder.log)"
  else
    say "test_cuda_voice_encoder: no time left in the tests' slice"
    test_rc=1
  fi
  [ -n "$NO_NVRTC_FILTER" ] && say "persist-dynamic was NOT tested: no NVRTC (see above)"
  end_phase
fi

# Tests the budget left out did not pass.
[[ " ${skipped[*]} " == *" tests "* ]] && test_rc=1
if [ $BUILD_ONLY = 1 ]; then
  "$SPEAKERSEG" bench --engine cuda --batch 1 --seconds 0 --runs 1 2>&1 | head -n 2
  say "done in $((SECONDS - T0)) s"
  [ $test_rc = 0 ] && exit 0 || exit 1
fi

# --- 4. Live channels on the GPU (issue 6: >= 5 000 on one H200) --------------------------------
# `speakerseg live`: N real-time channels through the element's streaming logic and one shared
# CUDA engine (no GStreamer here); ok = announcements delayed by at most 0.5 s more at p95, no
# window dropped.
feeders=$(($(nproc) / 2 > 0 ? $(nproc) / 2 : 1))
live() {  # live CHANNELS BATCHES_IN_FLIGHT [OPTION...]
  local n=$1 lanes=$2
  shift 2
  local what="live $n channels, $lanes in flight${1:+ $*}"
  local log="$LOGS/live-$n-in-flight-$lanes${1:+-${1#--}}.log"
  [ "$(remaining)" -gt 35 ] || {
    say "$what: skipped, $(remaining) s left in the slice"
    return
  }
  timeout -k 5 "$(remaining)" "$SPEAKERSEG" live --engine cuda --batch 512 --channels "$n" \
    --in-flight "$lanes" --seconds 20 --warmup 10 --feeders "$feeders" "$@" >"$log" 2>&1
  [ $? = 124 ] && say "$what: stopped at the end of the slice"
  echo "$what:"
  tail -n 3 "$log"
}
# 3 000: the first run's one batch at a time held 2 000 and not 3 000; two batches in flight
# (issue 36 §3) should hold it; and with streams' audio kept on the device (issue 36 §1: each
# window uploads its new second, not its 10 s).
if begin live 115 40; then
  echo "(speakerseg live, shared CUDA engine, batch 512, 20 s measured after 10 s, $feeders feeders)"
  live 3000 1
  live 3000 2
  live 3000 2 --device-audio
  end_phase
fi

# --- 5. Benchmark rows -------------------------------------------------------------------------
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" <<<"$2"; }
bench() {  # bench BATCH ARGS...: prints "median p99 windows/s runs start-up_s" or "error: ..."
  local batch=$1 out seconds=1 runs=20 limit rc
  shift
  [ "$batch" -ge 128 ] && runs=5
  # The CPU rows only give the ratio: a few passes each, so that they leave the time to the GPU.
  [ "$1 $2" = "--engine cpu" ] && seconds=0.3 runs=3
  # One row may not eat the slice: an explicit persist-dynamic engine of 512 builds (NVRTC) and
  # captures ten batch classes before its first pass.
  limit=$(remaining)
  [ "$limit" -gt "$ROW_TIMEOUT" ] && limit=$ROW_TIMEOUT
  out=$(timeout -k 5 "$limit" "$SPEAKERSEG" bench --json --batch "$batch" \
    --seconds $seconds --runs $runs "$@" 2>"$LOGS/bench.err")
  rc=$?
  if [ $rc = 124 ]; then
    echo "error: stopped after $limit s (GPU_CHECK_ROW_TIMEOUT or the phase's slice)"
    return
  fi
  if [ -z "$out" ]; then
    echo "error: $(grep -v '^speakerseg: warning' "$LOGS/bench.err" | tail -n 1 | cut -c1-150)"
    return
  fi
  # The engine's description says how long making it (every batch class planned, run and
  # captured) took.
  printf '%s %s %s %s %s\n' "$(field median_ms "$out")" "$(field p99_ms "$out")" \
    "$(field windows_per_s "$out")" "$(field runs "$out")" \
    "$(sed -n 's/.*batch classes ready in \([0-9.]*\) s.*/\1/p' <<<"$out")"
  grep '^speakerseg: warning' "$LOGS/bench.err" | sed 's/^/    /' >&2
}
# Assigned, not only declared: under set -u, ${#best[@]} of a declared but never assigned array is
# an unbound variable, which stopped the summary at the end of any run whose table rows all
# failed or did not run.
declare -A cpu_wps=() best=() best_ms=()
ROW_FORMAT='%-28s %6s %6s %11s %11s %12s %5s %9s %9s\n'
table_header() {
  echo "(10 s windows of sample.wav, FP32 unless a row says fp16; median and p99 per forward pass)"
  printf "$ROW_FORMAT" engine batch graphs median_ms p99_ms windows/s runs vs_cpu startup_s
}
cpu_row() {  # cpu_row BATCH
  local med p99 wps runs
  read -r med p99 wps runs <<<"$(bench "$1" --engine cpu)"
  cpu_wps[$1]=$wps
  printf "$ROW_FORMAT" "cpu ($(nproc) threads)" "$1" - "$med" "$p99" "$wps" "$runs" 1.0 -
}
algorithms="standard persist-static-small-h persist-dynamic"
[ -n "$NO_NVRTC_FILTER" ] && algorithms="standard persist-static-small-h"
gpu_row() {  # gpu_row BATCH ALGORITHM on|off [seq-major|fp16]
  local batch=$1 algorithm=$2 graphs=$3 line med p99 wps runs startup ratio extra=() label=$2
  [ "$graphs" = off ] && extra=(--no-cuda-graphs)
  [ "${4:-}" = seq-major ] && extra+=(--lstm-seq-major) && label="$algorithm seq"
  [ "${4:-}" = fp16 ] && extra+=(--fp16) && label="$algorithm fp16"
  line=$(bench "$batch" --engine cuda --lstm-algorithm "$algorithm" "${extra[@]}")
  if [[ $line == error:* ]]; then
    printf '%-28s %6s %6s  %s\n' "$label" "$batch" "$graphs" "$line"
    return
  fi
  read -r med p99 wps runs startup <<<"$line"
  ratio=$(awk -v g="$wps" -v c="${cpu_wps[$batch]:-}" 'BEGIN { if (c > 0) printf "%.1f", g / c; else print "-" }')
  printf "$ROW_FORMAT" "$label" "$batch" "$graphs" "$med" "$p99" "$wps" "$runs" "$ratio" "${startup:--}"
  # The fastest per batch is what sets auto's thresholds: the default rows only, batch-major and
  # fp32 (sequence-major and fp16 rows are compared by eye beside them).
  [ -n "${4:-}" ] && return
  local key="$batch $graphs"
  if [ -z "${best_ms[$key]:-}" ] || awk -v a="$med" -v b="${best_ms[$key]}" 'BEGIN { exit !(a < b) }'; then
    best_ms[$key]=$med
    best[$key]=$algorithm
  fi
}
# rows BATCHES GRAPHS [cpu]: GPU rows of every algorithm (and the CPU row first) while the slice lasts
rows() {
  local batch algorithm
  for batch in $1; do
    if [ "${3:-}" = cpu ]; then
      [ "$(remaining)" -gt 5 ] || break
      cpu_row "$batch"
    fi
    for algorithm in $algorithms; do
      if [ "$(remaining)" -le 5 ]; then
        say "$PHASE: slice spent at batch $batch ($algorithm, graphs $2); the rest of its rows skipped"
        return
      fi
      gpu_row "$batch" "$algorithm" "$2"
    done
  done
}
if begin table 90 30; then
  table_header
  rows "1 8 32 128 512" on cpu
  end_phase
fi

# --- 5b. The peer: pyannote's PyanNet in PyTorch on the same GPU and windows (issue 36 §5) -------
# scripts/benchmarks/pyannet_torch.py, with the weights the bundle exported from the same model;
# torch is the GPU image's, not the project's. Its parity with ONNX Runtime first, then its rows,
# then ours / PyTorch fp32 at each batch the table measured.
if begin peer 110 30; then
  # Without the bundle's Debian libraries ahead of the image's: torch is the image's own.
  torch_env=(env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH#"$DLIB":}")
  torch_python=$(for py in python3 /opt/*/.venv/bin/python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 && "${torch_env[@]}" "$py" -c 'import torch' 2>/dev/null &&
      echo "$py" && break
  done)
  # Ours with the LSTM's sequences sequence-major, as PyTorch hands them to cuDNN (the first run's
  # lead: its whole pass at batch 32 took half our LSTM's time), beside the batch-major rows above.
  # And FP16 tensor cores past SincNet (--fp16), beside PyTorch's fp16 autocast below.
  table_header
  echo "(seq: the LSTM's sequences sequence-major, speakerseg --lstm-seq-major; fp16: --fp16)"
  for batch in 32 512; do
    for algorithm in standard persist-static-small-h; do
      [ "$(remaining)" -gt 25 ] && gpu_row "$batch" "$algorithm" on seq-major
      [ "$(remaining)" -gt 25 ] && gpu_row "$batch" "$algorithm" on fp16
    done
  done
  if [ -z "$torch_python" ]; then
    say "peer: no Python here imports torch; PyTorch's rows not measured"
  else
    timeout -k 5 "$(remaining)" "${torch_env[@]}" "$torch_python" \
      scripts/benchmarks/pyannet_torch.py --device cuda --batch 1 32 512 --seconds 1 \
      --weights "$DATA/model/pyannet-weights.npz" --reference "$DATA/reference" \
      >"$LOGS/peer.log" 2>&1
    [ $? = 124 ] && say "peer: stopped at the end of the slice"
    grep -v '^{"engine"' "$LOGS/peer.log" | tail -n 20
    for batch in 1 32 512; do
      theirs=$(field median_ms "$(grep "\"engine\": \"pytorch fp32\", \"batch\": $batch," "$LOGS/peer.log")")
      ours=${best_ms["$batch on"]:-}
      [ -n "$theirs" ] && [ -n "$ours" ] &&
        echo "batch $batch: ours ${best["$batch on"]} $ours ms, PyTorch fp32 $theirs ms:" \
          "ours takes $(awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%.2f", a / b}')x PyTorch's time"
    done
  fi
  end_phase
fi

# --- 5c. The element on the GPU (issue 36 §4) ----------------------------------------------------
# The plugin built against the bundle's GStreamer (Debian 12's, gst.tar.xz) in a build of its own,
# so that the other phases never depend on it; GStreamer and GLib on the library path of these
# commands only. sample.wav through filesrc ! wavparse ! audioconvert ! audioresample !
# speakerchange ! fakesink with engine=cpu, then engine=cuda: the same changes within two frames
# (scripts/gpu/compare_changes.py); then two elements in one process (a tee), engine=cuda, which
# share one engine (the default shared-engine=true): each gives the same changes again, and the
# shared engine's description they log is one (its start-up time included).
if begin element 120 60; then
  GST=$WORK/gst
  GLIB=$GST/usr/lib/x86_64-linux-gnu
  GBUILD=$WORK/build-gst
  if ! [ -x "$GST/usr/bin/gst-launch-1.0" ]; then
    say "element: the bundle has no gst.tar.xz (made before session 23): run scripts/gpu/gpu-bundle.sh"
  else
    gst_env=(env "LD_LIBRARY_PATH=$GLIB:$LD_LIBRARY_PATH" "LIBRARY_PATH=$GLIB:$LIBRARY_PATH"
      "PKG_CONFIG_LIBDIR=$GLIB/pkgconfig:$PKG_CONFIG_LIBDIR")
    greconf=()
    [ -f "$GBUILD/build.ninja" ] && greconf=(--reconfigure)
    if ! "${gst_env[@]}" "${MESON[@]}" setup "${greconf[@]}" "$GBUILD" "${setup_args[@]}" \
      -Dgst=enabled -Dtests=false >"$LOGS/element-setup.log" 2>&1; then
      tail -n 20 "$LOGS/element-setup.log"
      say "element: meson setup with GStreamer failed (log: $LOGS/element-setup.log)"
    elif ! timeout -k 5 "$(remaining)" "${gst_env[@]}" "${MESON[@]}" compile -C "$GBUILD" \
      gst/speakerchange/gstspeakerchange >"$LOGS/element-build.log" 2>&1; then
      grep -E -B2 -A8 'error|FAILED' "$LOGS/element-build.log" | head -n 40
      say "element: the plugin did not build (log: $LOGS/element-build.log)"
    else
      say "element: plugin built, $((SECONDS - PHASE_START)) s into the phase"
      # The CUDA engine is a module the plugin opens at run time: the main build's (the same
      # sources and options), since this build made the plugin only.
      run_env=("${gst_env[@]}" "GST_PLUGIN_SYSTEM_PATH_1_0=$GLIB/gstreamer-1.0"
        "SPEAKERSEG_CUDA_MODULE=$BUILD/core/libspeakerseg-cuda.so"
        "GST_PLUGIN_PATH_1_0=$GBUILD/gst/speakerchange"
        "GST_PLUGIN_SCANNER_1_0=$GLIB/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner"
        "GST_REGISTRY_1_0=$WORK/gst-registry.bin" "GST_DEBUG=speakerchange:4")
      source=(filesrc "location=$DATA/audio/sample.wav" ! wavparse ! audioconvert ! audioresample)
      # The messages (stdout) apart from the debug log (stderr), whose lines would cut into them.
      element_run() {  # element_run NAME PIPELINE...
        local name=$1 log=$LOGS/element-$1.log err=$LOGS/element-$1.err
        shift
        timeout -k 5 "$(remaining)" "${run_env[@]}" "$GST/usr/bin/gst-launch-1.0" -m "$@" \
          >"$log" 2>"$err"
        echo "element $name: exit $?, $(grep -c ': speaker-change, ' "$log") changes"
        grep -o 'shared engine cuda.*batch classes ready in [^)]*)' "$err" | sort | uniq -c
        grep -E -m 3 'ERROR|error:' "$log" "$err"
      }
      element_run cpu "${source[@]}" ! speakerchange engine=cpu ! fakesink
      element_run cuda "${source[@]}" ! speakerchange engine=cuda ! fakesink
      element_run two-cuda "${source[@]}" ! tee name=t t. ! queue ! speakerchange engine=cuda \
        ! fakesink t. ! queue ! speakerchange engine=cuda ! fakesink
      "$PYTHON" scripts/gpu/compare_changes.py "$LOGS/element-cpu.log" "$LOGS/element-cuda.log"
      "$PYTHON" scripts/gpu/compare_changes.py "$LOGS/element-cpu.log" "$LOGS/element-two-cuda.log"
    fi
  fi
  end_phase
fi

# --- 6. The voice encoder (identity by voice), CPU and GPU on the same partials -----------------
if begin voice 30 15; then
  echo "(160-frame partials of sample.wav, speakerseg bench-voice)"
  for batch in 1 32 256; do
    for engine in cpu cuda; do
      [ "$(remaining)" -gt 3 ] || {
        say "voice: slice spent at $batch partials ($engine)"
        break 2
      }
      timeout -k 5 "$(($(remaining) < 20 ? $(remaining) : 20))" "$SPEAKERSEG" bench-voice \
        --engine $engine --batch $batch --seconds 1 2>&1 | tail -n 1
    done
  done
  end_phase
fi

# --- 7. The memory checkers on our kernels ------------------------------------------------------
# compute-sanitizer (next to nvcc): memcheck finds out-of-bounds accesses, initcheck reads of
# device memory nothing wrote (the tests' NaN fill of the arena is turned off for it: a memset
# counts as written). It slows every kernel down a lot, so: one window per LSTM algorithm (eager)
# and with a graph, and the alternating-batch test, for memcheck; fewer for initcheck.
SANITIZER=$(command -v compute-sanitizer || ls "$NVCC_ROOT"/bin/compute-sanitizer 2>/dev/null ||
  true)
sanitize() {  # sanitize TOOL SECONDS FILTER [VAR=VALUE...]: runs, prints, sets test_rc on errors
  local tool=$1 seconds=$2 gtest_filter=$3 log="$LOGS/$1.log" rc ours
  shift 3
  echo "--- compute-sanitizer $tool (at most $seconds s)"
  # API errors off: the engine provokes and handles some on purpose (an algorithm probe, a
  # capture that falls back); what this step is for is our kernels' memory accesses.
  env "$@" timeout -k 10 "$seconds" "${MESON[@]}" test -C "$BUILD" --no-rebuild --verbose \
    --timeout-multiplier 0 \
    --wrapper "$SANITIZER --tool $tool --report-api-errors no $([ "$tool" = memcheck ] &&
      echo --leak-check no) --error-exitcode 3" \
    cuda_engine --test-args=--gtest_filter="$gtest_filter" >"$log" 2>&1
  rc=$?
  grep -E '^========= (ERROR SUMMARY|Invalid|Uninitialized|Program hit|Error)' "$log" | head -n 20
  grep -E '^\[ +(OK|FAILED) +\]' "$log" | head -n 8
  # Errors reported count whatever the exit (a timeout or a test failing under the sanitizer
  # still leaves them in the log). initcheck also sees cuBLAS and cuDNN read workspace they
  # never wrote, by design: only reports whose stack names our code fail the check.
  ours=$(grep -A4 -E '^========= (Invalid|Uninitialized)' "$log" | grep -c 'speakerseg::')
  if [ "$tool" = memcheck ] && grep -qE '^========= (Invalid|Uninitialized|ERROR SUMMARY: [1-9])' "$log"; then
    say "memcheck: errors found (log: $log)"
    test_rc=1
  elif [ "$tool" = initcheck ] && [ "$ours" -gt 0 ]; then
    say "initcheck: $ours reads of unwritten memory in our code (log: $log)"
    test_rc=1
  else
    grep -q '^========= ERROR SUMMARY: [1-9]' "$log" &&
      say "$tool: errors only in library code (cuBLAS/cuDNN), not counted (log: $log)"
    case $rc in
      0) say "$tool: no error in our code" ;;
      124 | 137) say "$tool: no error in our code in the $seconds s it had; stopped unfinished" ;;
      *) say "$tool: no error in our code; meson test exited $rc (a test failed under the sanitizer, or it cannot run on this runtime; log: $log)" ;;
    esac
  fi
}
if [ -z "$SANITIZER" ]; then
  [[ $PHASES == *" sanitizer "* ]] && say "sanitizer: compute-sanitizer not found, skipped"
elif begin sanitizer 100 40; then
  sanitize memcheck $(($(remaining) * 3 / 5)) \
    '*CudaParity*first_window_*_eager:*CudaParity*first_window_standard_graphs:CudaEngine.AlternatingBatchSizesKeepResults'
  if [ "$(remaining)" -gt 20 ]; then
    sanitize initcheck "$(remaining)" \
      '*CudaParity*first_window_standard_eager:*CudaParity*first_window_persist_static_small_h_graphs:CudaEngine.EveryBatchSizeRunsAsItsClass' \
      SPEAKERSEG_CUDA_TEST_NO_NAN_FILL=1
  else
    say "initcheck: skipped, $(remaining) s left in the slice"
  fi
  end_phase
fi

# --- 8. The rest of the table, while the budget lasts ------------------------------------------
if begin long-table 100000 30; then
  table_header
  # 256: auto's one class that no row has measured yet (plan_policy.cpp gives it standard).
  rows "2 4 16 64 256" on
  rows "1 2 4 8 16 32 64 128 512" off
  live 5000 2
  live 5000 2 --device-audio
  # Identity by voice on (issue 36 §3: >= 5 000): the GPU's voice encoder, and the host's side of
  # identity stitched by eight threads beside the lanes' workers.
  live 5000 2 --reidentify --stitch-threads 8
  end_phase
fi

# --- What `auto` should pick ---------------------------------------------------------------------
# cuda::wanted_lstm_algorithm in plan_policy.cpp (the voice encoder: the same with standard for
# persist-static-small-h): persist-dynamic up to 2, persist-static-small-h up to 128, standard above,
# from the first run's table on an H200 (graphs on; 256 not measured there).
if [ ${#best[@]} -gt 0 ]; then
  echo "=== fastest LSTM algorithm per batch among the rows above (median per forward pass): the auto thresholds"
  printf '%6s  %-40s %-40s\n' batch "graphs on" "graphs off"
  for batch in 1 2 4 8 16 32 64 128 256 512; do
    on=${best["$batch on"]:-}
    off=${best["$batch off"]:-}
    [ -n "$on$off" ] || continue
    printf '%6s  %-40s %-40s\n' "$batch" "${on:--} ${best_ms["$batch on"]:+(${best_ms["$batch on"]} ms)}" \
      "${off:--} ${best_ms["$batch off"]:+(${best_ms["$batch off"]} ms)}"
  done
fi
[ ${#skipped[@]} -gt 0 ] && say "skipped for the budget: ${skipped[*]} (GPU_CHECK_PHASES=\"${skipped[*]}\" runs them)"
say "done in $((SECONDS - T0)) s; results in $RESULTS"
[ $test_rc = 0 ] && exit 0 || exit 1
