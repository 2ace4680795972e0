#!/usr/bin/env bash
# The GPU check, one command: on a Linux x86-64 machine with an NVIDIA GPU, nvcc 13 and cuDNN 9
# (the nvidia-cudnn-cu13 wheel will do), with no network, no GStreamer and none of Debian's -dev
# packages, it
#   1. prints the GPU, driver, CUDA, cuDNN and NVRTC versions, before anything else;
#   2. unpacks .gpu-bundle/ (made here by scripts/gpu-bundle.sh) and builds the core, the CUDA
#      module (segmentation engine and voice encoder), speakerseg and the test suites with plain
#      compiler commands (no meson);
#   3. runs test_cuda_engine: ONNX Runtime parity of every algorithm, graphs off and on, within
#      2e-3 on every pass, with the device arena filled with NaN; every stage of the GPU pass
#      against the host pass, so that a failure names its stage; whether replays are bit-identical
#      is reported, not asserted, and where they differ the tests run again with
#      CUBLAS_WORKSPACE_CONFIG=:4096:2 and both results are shown; then test_cuda_voice_encoder:
#      GE2E embeddings against the original weights (cosine >= 0.9999), every algorithm;
#   4. prints a benchmark table: per-forward median and p99, windows/s, engine start-up, for batch
#      1, 2, 4, 8, 16, 32, 64, 128, 512 x each LSTM algorithm x CUDA graphs on/off, the CPU engine
#      on the same windows, then the fastest algorithm per batch: the table that sets `auto`; then
#      the voice encoder's partials/s, CPU and GPU, at 1, 32 and 256 partials;
#   5. runs 2 000 and 5 000 live channels on one shared CUDA engine (speakerseg live);
#   6. runs a few GPU tests under compute-sanitizer's memcheck and initcheck while time is left.
# Meant to finish in under 8 minutes on a 16-core machine; past GPU_CHECK_BUDGET seconds (default
# 420) it skips the remaining benchmark rows and says so.
#
# Usage: scripts/gpu-check.sh [--build-only]
#   --build-only  no GPU needed: build and run the tests (which then skip), no benchmark.
# Exit: 0 all tests passed; 1 a build or test failure; 77 no NVIDIA GPU (nothing checked).
# Environment: GPU_BUNDLE (default .gpu-bundle), GPU_CHECK_DIR (default /tmp/speakerseg-gpu-check),
# CUDNN_ROOT / CUDA_HOME to point at cuDNN or the toolkit where the search below misses them.
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
BUNDLE=$(realpath -m "${GPU_BUNDLE:-.gpu-bundle}")
WORK=${GPU_CHECK_DIR:-/tmp/speakerseg-gpu-check}
BUDGET=${GPU_CHECK_BUDGET:-420}
BUILD_ONLY=0
[ "${1:-}" = "--build-only" ] && BUILD_ONLY=1

say() { printf 'gpu-check: %s\n' "$*"; }
die() {
  say "error: $*" >&2
  exit 1
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
  say "(scripts/gpu-check.sh --build-only builds and runs the tests, which skip without a GPU)"
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

mkdir -p "$WORK"
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
CXX=${CXX:-g++}
command -v "$CXX" >/dev/null 2>&1 || die "no C++ compiler ($CXX)"
echo "=== machine"
if [ -n "$gpus" ]; then
  echo "$gpus" | sed 's/^/GPU /'
else
  echo "GPU: none (--build-only)"
fi
echo "nvcc: $("$NVCC" --version | grep -o 'release [^,]*, V[0-9.]*')  ($NVCC)"
echo "host compiler: $("$CXX" --version | head -n 1)"
if "$CXX" -O0 -o "$WORK/versions" "$WORK/versions.cpp" -ldl 2>"$WORK/versions.log"; then
  "$WORK/versions" "$CUDART" "$CUDNN"
else
  echo "(version probe did not build: $(head -n 1 "$WORK/versions.log"))"
fi
echo "libraries: $CUDART $CUBLAS $CUDNN ${NVRTC:-(no libnvrtc.so.13)}"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"

# --- 2. Build --------------------------------------------------------------------------------

[ -f "$BUNDLE/deps.tar.xz" ] && [ -f "$BUNDLE/data.tar.xz" ] ||
  die "$BUNDLE/deps.tar.xz and data.tar.xz are missing: run scripts/gpu-bundle.sh where the Debian packages are"
echo "=== build (in $WORK)"
start_build=$SECONDS
DEPS=$WORK/deps
DATA=$WORK/data
rm -rf "$DEPS" "$DATA" "$WORK/obj"
mkdir -p "$DEPS" "$DATA" "$WORK/obj" "$WORK/bin"
tar -C "$DEPS" -xJf "$BUNDLE/deps.tar.xz" || die "cannot unpack $BUNDLE/deps.tar.xz"
tar -C "$DATA" -xJf "$BUNDLE/data.tar.xz" || die "cannot unpack $BUNDLE/data.tar.xz"
DLIB=$DEPS/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$DLIB:$LD_LIBRARY_PATH
JOBS=$(nproc)

CXXFLAGS=(-std=c++17 -O3 -DNDEBUG -fPIC -fopenmp -Wall -Wextra -DONNX_ML=1 -DONNX_NAMESPACE=onnx
  -DSPEAKERSEG_HAVE_CUDA=1 -I"$SRC/core" -I"$DEPS/usr/include"
  -I"$DEPS/usr/include/x86_64-linux-gnu") # mpg123.h
# -I/usr/include would break libstdc++'s #include_next: the system folder needs no flag.
for d in $(printf '%s\n' "$CUDNN_INC" "$CUDA_INC" "$CUBLAS_INC" | awk '!seen[$0]++'); do
  [ "$d" = /usr/include ] || CXXFLAGS+=(-I"$d")
done
GENCODE=(-gencode=arch=compute_75,code=sm_75 -gencode=arch=compute_80,code=sm_80
  -gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_89,code=sm_89
  "-gencode=arch=compute_90,code=[sm_90,compute_90]")
compile() {  # compile SOURCE: one object, its log beside it
  local o isa=()
  o="$WORK/obj/$(basename "$1" .cpp).o"
  # The LSTM recurrence of each instruction set is compiled for that set (core/meson.build).
  case "$1" in
    *lstm_recurrence_avx2.cpp) isa=(-mavx2 -mfma) ;;
    *lstm_recurrence_avx512.cpp) isa=(-mavx512f -mavx2 -mfma) ;;
  esac
  "$CXX" "${CXXFLAGS[@]}" "${isa[@]}" -c "$1" -o "$o" >"$o.log" 2>&1 || {
    cat "$o.log"
    touch "$WORK/obj/FAILED"
  }
}
"$NVCC" -std=c++17 -O3 --threads=0 "${GENCODE[@]}" -Xcompiler=-fPIC,-Wall,-Wextra \
  -I"$SRC/core" -c "$SRC/core/engines/cuda/cuda_kernels.cu" -o "$WORK/obj/cuda_kernels.o" \
  >"$WORK/obj/cuda_kernels.o.log" 2>&1 || {
  cat "$WORK/obj/cuda_kernels.o.log"
  touch "$WORK/obj/FAILED"
} &
# As in meson.build: core (with the algorithm names) in libcore.a; the engine and the kernels in
# the module libspeakerseg-cuda.so, the only thing that links the CUDA libraries; the loader, which
# opens the module, in the programs.
MODULE=$WORK/bin/libspeakerseg-cuda.so
MODEL=$DATA/model/segmentation-3.0.onnx
CXXFLAGS+=(-DSPEAKERSEG_BUILD_MODEL="\"$MODEL\"" -DSPEAKERSEG_INSTALLED_MODEL="\"$MODEL\""
  -DSPEAKERSEG_BUILD_VOICE_MODEL="\"$DATA/model/voice-encoder-ge2e.onnx\""
  -DSPEAKERSEG_INSTALLED_VOICE_MODEL="\"$DATA/model/voice-encoder-ge2e.onnx\"")
CUDA_SRC=$SRC/core/engines/cuda
# What goes into the module and not into libcore.a (core/meson.build's shared_module).
MODULE_SOURCES="cuda_module cuda_engine cuda_voice_encoder cuda_errors cudnn_rnn cuda_graph
  cuda_buffers"
MODULE_OBJECTS=()
for m in $MODULE_SOURCES; do MODULE_OBJECTS+=("$WORK/obj/$m.o"); done
for src in $(find "$SRC/core" -name '*.cpp' -not -path "$CUDA_SRC/*" | sort) \
  "$CUDA_SRC"/{cudnn_lstm_weights,forward_pass,lstm_algorithm,plan_policy,voice_pass}.cpp \
  $(printf "$CUDA_SRC/%s.cpp " $MODULE_SOURCES); do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  compile "$src" &
done
CXXFLAGS+=(-DSPEAKERSEG_CUDA_MODULE_BUILD="\"$MODULE\"" -DSPEAKERSEG_CUDA_MODULE_INSTALLED="\"$MODULE\"")
compile "$CUDA_SRC/cuda_loader.cpp" &
wait
[ -e "$WORK/obj/FAILED" ] && die "compiling the core failed"
for log in "$WORK"/obj/*.log; do grep -qi warning "$log" && cat "$log"; done
rm -f "$WORK/libcore.a"
ar rcs "$WORK/libcore.a" $(ls "$WORK"/obj/*.o | grep -v -F "${MODULE_OBJECTS[@]/#/-e}" \
  -e /cuda_kernels.o -e /cuda_loader.o) || die "ar failed"

CPU_LIBS=(-L"$DLIB" -l:libdnnl.so.2 -l:libonnx_proto.so.1 -l:libprotobuf.so.32 -l:libsndfile.so.1
  -l:libmpg123.so.0 -ldl -lpthread -fopenmp -Wl,-rpath-link,"$DLIB" -Wl,--disable-new-dtags)
"$CXX" -shared -fvisibility=hidden -o "$MODULE" "${MODULE_OBJECTS[@]}" "$WORK/obj/cuda_kernels.o" \
  "$WORK/libcore.a" "${CPU_LIBS[@]}" "$CUDART" "$CUBLAS" "$CUDNN" -Wl,-rpath,"$DLIB:$lib_path" \
  >"$WORK/module.log" 2>&1 || {
  cat "$WORK/module.log"
  die "linking $MODULE failed"
}
LIBS=("$WORK/obj/cuda_loader.o" "$WORK/libcore.a" "${CPU_LIBS[@]}" -Wl,-rpath,"$DLIB")
"$CXX" "${CXXFLAGS[@]}" \
  -DSPEAKERSEG_SAMPLE_WAV="\"$DATA/audio/sample.wav\"" "$SRC/tools/speakerseg.cpp" \
  -o "$WORK/bin/speakerseg" "${LIBS[@]}" &
tool_pid=$!
# The GPU suites of both engines, and the host-side suites too: the forward pass on the CPU, the
# engines' GPU-free decisions, the LSTM weight packing of both networks, and the CPU LSTM kernel
# (these machines' CPUs may run its AVX-512 path, which the project's own may not).
HOST_SUITES="cuda_forward_pass cuda_plan_policy cudnn_lstm_weights lstm_recurrence"
suite_source() { [ -f "$SRC/tests/engines/cuda/test_$1.cpp" ] && echo "$SRC/tests/engines/cuda/test_$1.cpp" ||
  echo "$SRC/tests/engines/test_$1.cpp"; }
host_pids=()
for t in $HOST_SUITES cuda_engine cuda_voice_encoder; do
  "$CXX" "${CXXFLAGS[@]}" -I"$SRC/tests" "$(suite_source "$t")" \
    -o "$WORK/bin/test_$t" "$DLIB/libgtest_main.a" "$DLIB/libgtest.a" "${LIBS[@]}" \
    >"$WORK/test_$t.build.log" 2>&1 &
  host_pids+=($!)
done
wait $tool_pid || die "building speakerseg failed"
for pid in "${host_pids[@]}"; do
  wait "$pid" || {
    cat "$WORK"/test_*.build.log
    die "building the host test suites failed"
  }
done
grep -qi warning "$WORK"/test_*.build.log && cat "$WORK"/test_*.build.log
say "built in $((SECONDS - start_build)) s"

# --- 3. Tests --------------------------------------------------------------------------------

export SPEAKERSEG_MODEL=$MODEL
export SPEAKERSEG_REFERENCE_DIR=$DATA/reference
export SPEAKERSEG_VOICE_MODEL=$DATA/model/voice-encoder-ge2e.onnx
export SPEAKERSEG_VOICE_REFERENCE_DIR=$DATA/reference-voice
count() { grep -c "$1" "$2"; }  # count PATTERN LOG

echo "=== host suites: the forward pass on the CPU, the engines' GPU-free decisions, the packing,"
echo "    the CPU LSTM kernel ($(grep -o -m1 -w 'avx512f' /proc/cpuinfo || echo 'no avx512f') on this CPU)"
host_rc=0
for t in $HOST_SUITES; do
  "$WORK/bin/test_$t" >"$WORK/test_$t.log" 2>&1 || host_rc=1
  say "test_$t: $(count '^\[       OK \]' "$WORK/test_$t.log") passed," \
    "$(count '^\[  FAILED  \] .*(' "$WORK/test_$t.log") failed," \
    "$(count '^\[  SKIPPED \] .*(' "$WORK/test_$t.log") skipped"
  grep -E -A12 '^\[  FAILED  \]|Failure$' "$WORK/test_$t.log" | head -n 40
done

echo "=== test_cuda_engine"
filter=()
[ -n "$NO_NVRTC_FILTER" ] && filter=(--gtest_filter="-$NO_NVRTC_FILTER")
engine_tests() {  # engine_tests LOG [VAR=VALUE...]: runs the suite, prints what it found
  local log=$1 rc
  shift
  env "$@" "$WORK/bin/test_cuda_engine" "${filter[@]}" >"$log" 2>&1
  rc=$?
  grep -E '^\[ (cuda|cuda tf32|warning|stage) ' "$log"
  grep -E '^(GPU|CUDA|cuBLAS|cuDNN|NVRTC)' "$log" | sort -u
  grep -E -A12 '^\[  FAILED  \]|Failure$' "$log" | head -n 80
  grep -m1 'Skipped' -A1 "$log" | tail -n 1 | sed 's/^/skip reason: /'
  say "tests${1:+ with $*}: $(count '^\[       OK \]' "$log") passed," \
    "$(count '^\[  FAILED  \] .*(' "$log") failed, $(count '^\[  SKIPPED \] .*(' "$log") skipped;" \
    "replays: $(count '^\[ replays \] .*bit-identical' "$log") bit-identical," \
    "$(count '^\[ replays \] .*DIFFER' "$log") differ (log: $log)"
  return $rc
}
engine_tests "$WORK/test.log"
test_rc=$?
[ $test_rc = 0 ] || say "test_cuda_engine exited with $test_rc"
# Replays that differ are reported, not failed: cuBLAS may pick split-K reductions whose order
# depends on its workspace. Again with a fixed workspace configuration, to tell that from ours.
if grep -q '^\[ replays \] .*DIFFER' "$WORK/test.log"; then
  grep '^\[ replays \] .*DIFFER' "$WORK/test.log" | head -n 20
  echo "=== test_cuda_engine again with CUBLAS_WORKSPACE_CONFIG=:4096:2 (replays differed)"
  engine_tests "$WORK/test-cublas-workspace.log" CUBLAS_WORKSPACE_CONFIG=:4096:2
  grep '^\[ replays \] .*DIFFER' "$WORK/test-cublas-workspace.log" | head -n 20
fi
echo "=== test_cuda_voice_encoder"
"$WORK/bin/test_cuda_voice_encoder" "${filter[@]}" >"$WORK/test_voice.log" 2>&1 || test_rc=1
grep -E '^\[ (cuda voice|warning|replays) ' "$WORK/test_voice.log" | head -n 80
grep -E -A12 '^\[  FAILED  \]|Failure$' "$WORK/test_voice.log" | head -n 60
say "test_cuda_voice_encoder: $(count '^\[       OK \]' "$WORK/test_voice.log") passed," \
  "$(count '^\[  FAILED  \] .*(' "$WORK/test_voice.log") failed," \
  "$(count '^\[  SKIPPED \] .*(' "$WORK/test_voice.log") skipped (log: $WORK/test_voice.log)"
[ $host_rc = 0 ] || test_rc=1
[ -n "$NO_NVRTC_FILTER" ] && say "persist-dynamic was NOT tested: no NVRTC (see above)"

if [ $BUILD_ONLY = 1 ]; then
  "$WORK/bin/speakerseg" bench --engine cuda --batch 1 --seconds 0 --runs 1 2>&1 | head -n 2
  [ $test_rc = 0 ] && exit 0 || exit 1
fi

# --- 4. Benchmark ----------------------------------------------------------------------------

echo "=== benchmark: 10 s windows of sample.wav, FP32; median and p99 per forward pass"
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" <<<"$2"; }
bench() {  # bench BATCH ARGS...: prints "median p99 windows/s runs start-up_s" or "error: ..."
  local batch=$1 out seconds=1 runs=20
  shift
  [ "$batch" -ge 128 ] && runs=5
  # The CPU rows only give the ratio: a few passes each, so that they leave the time to the GPU.
  [ "$1 $2" = "--engine cpu" ] && seconds=0.3 runs=3
  # One row may not eat the run: an explicit persist-dynamic engine of 512 builds (NVRTC) and
  # captures ten batch classes before its first pass.
  out=$(timeout "${GPU_CHECK_ROW_TIMEOUT:-90}" "$WORK/bin/speakerseg" bench --json --batch "$batch" \
    --seconds $seconds --runs $runs "$@" 2>"$WORK/bench.err")
  local rc=$?
  if [ $rc = 124 ]; then
    echo "error: stopped after ${GPU_CHECK_ROW_TIMEOUT:-90} s (GPU_CHECK_ROW_TIMEOUT)"
    return
  fi
  if [ -z "$out" ]; then
    echo "error: $(grep -v '^speakerseg: warning' "$WORK/bench.err" | tail -n 1 | cut -c1-150)"
    return
  fi
  # The engine's description says how long making it (every batch class planned, run and
  # captured) took.
  printf '%s %s %s %s %s\n' "$(field median_ms "$out")" "$(field p99_ms "$out")" \
    "$(field windows_per_s "$out")" "$(field runs "$out")" \
    "$(sed -n 's/.*batch classes ready in \([0-9.]*\) s.*/\1/p' <<<"$out")"
  grep '^speakerseg: warning' "$WORK/bench.err" | sed 's/^/    /' >&2
}
declare -A cpu_wps best best_ms
BATCHES="1 2 4 8 16 32 64 128 512"
printf '%-26s %6s %6s %11s %11s %12s %5s %9s %9s\n' engine batch graphs median_ms p99_ms \
  windows/s runs vs_cpu startup_s
for batch in 1 8 32 128 512; do
  if [ $((SECONDS - start_build)) -gt "$BUDGET" ]; then
    say "time budget spent: CPU batch $batch and above skipped"
    break
  fi
  read -r med p99 wps runs <<<"$(bench "$batch" --engine cpu)"
  cpu_wps[$batch]=$wps
  printf '%-26s %6s %6s %11s %11s %12s %5s %9s %9s\n' "cpu ($(nproc) threads)" "$batch" - \
    "$med" "$p99" "$wps" "$runs" 1.0 -
done
algorithms="standard persist-static-small-h persist-dynamic"
[ -n "$NO_NVRTC_FILTER" ] && algorithms="standard persist-static-small-h"
for batch in $BATCHES; do
  for algorithm in $algorithms; do
    for graphs in on off; do
      if [ $((SECONDS - start_build)) -gt "$BUDGET" ]; then
        say "time budget spent ($BUDGET s): the remaining rows are skipped"
        break 3
      fi
      extra=()
      [ $graphs = off ] && extra=(--no-cuda-graphs)
      line=$(bench "$batch" --engine cuda --lstm-algorithm $algorithm "${extra[@]}")
      if [[ $line == error:* ]]; then
        printf '%-26s %6s %6s  %s\n' "$algorithm" "$batch" $graphs "$line"
        continue
      fi
      read -r med p99 wps runs startup <<<"$line"
      ratio=$(awk -v g="$wps" -v c="${cpu_wps[$batch]:-}" 'BEGIN { if (c > 0) printf "%.1f", g / c; else print "-" }')
      printf '%-26s %6s %6s %11s %11s %12s %5s %9s %9s\n' "$algorithm" "$batch" $graphs "$med" \
        "$p99" "$wps" "$runs" "$ratio" "${startup:--}"
      key="$batch $graphs"
      if [ -z "${best_ms[$key]:-}" ] || awk -v a="$med" -v b="${best_ms[$key]}" 'BEGIN { exit !(a < b) }'; then
        best_ms[$key]=$med
        best[$key]=$algorithm
      fi
    done
  done
done
# What `auto` should pick (cuda::wanted_lstm_algorithm in plan_policy.cpp, for both engines:
# today persist-dynamic for 1, persist-static-small-h up to 64, standard above, from the seed
# port's figures).
echo "=== fastest LSTM algorithm per batch (median per forward pass): the auto thresholds"
printf '%6s  %-40s %-40s\n' batch "graphs on" "graphs off"
for batch in $BATCHES; do
  on=${best["$batch on"]:-}
  off=${best["$batch off"]:-}
  [ -n "$on$off" ] || continue
  printf '%6s  %-40s %-40s\n' "$batch" "${on:--} ${best_ms["$batch on"]:+(${best_ms["$batch on"]} ms)}" \
    "${off:--} ${best_ms["$batch off"]:+(${best_ms["$batch off"]} ms)}"
done
# The voice encoder (identity by voice), CPU and GPU on the same partials.
echo "=== voice encoder: 160-frame partials of sample.wav (speakerseg bench-voice)"
for batch in 1 32 256; do
  for engine in cpu cuda; do
    if [ $((SECONDS - start_build + 10)) -gt "$BUDGET" ]; then
      say "time budget spent: voice encoder rows skipped"
      break 2
    fi
    timeout 60 "$WORK/bin/speakerseg" bench-voice --engine $engine --batch $batch --seconds 1 \
      2>&1 | tail -n 1
  done
done
# --- 5. Live channels on the GPU (issue 6: >= 5 000 on one H200) ------------------------------
# `speakerseg live`: N real-time channels through the element's streaming logic and one shared
# CUDA engine (no GStreamer here); ok = announcements delayed by at most 0.5 s more at p95, no
# window dropped. 30 s each, so it only runs while the budget allows.
echo "=== live channels, shared CUDA engine (speakerseg live, 20 s measured after 10 s)"
for channels in ${GPU_CHECK_CHANNELS:-2000 5000}; do
  if [ $((SECONDS - start_build + 35)) -gt "$BUDGET" ]; then
    say "time budget spent: live channels $channels and above skipped"
    break
  fi
  "$WORK/bin/speakerseg" live --engine cuda --batch 512 --channels "$channels" --seconds 20 \
    --warmup 10 --feeders "$(($(nproc) / 2 > 0 ? $(nproc) / 2 : 1))" 2>&1 | tail -n 3
done
# --- 6. The memory checkers on our kernels, while time is left ----------------------------------
# compute-sanitizer (next to nvcc): memcheck finds out-of-bounds accesses, initcheck reads of
# device memory nothing wrote (the tests' NaN fill of the arena is turned off for it: a memset
# counts as written). It works on some of these machines' runtimes and not on others, and slows
# every kernel down a lot, so: one window per LSTM algorithm (eager) and with a graph, and the
# alternating-batch test, for memcheck; fewer for initcheck.
SANITIZER=$(command -v compute-sanitizer || ls "$NVCC_ROOT"/bin/compute-sanitizer 2>/dev/null ||
  true)
sanitize() {  # sanitize TOOL SECONDS FILTER [VAR=VALUE...]: runs, prints, sets test_rc on errors
  local tool=$1 seconds=$2 filter=$3 log="$WORK/$1.log" rc ours
  shift 3
  echo "=== compute-sanitizer $tool (at most $seconds s)"
  # API errors off: the engine provokes and handles some on purpose (an algorithm probe, a
  # capture that falls back); what this step is for is our kernels' memory accesses.
  env "$@" timeout "$seconds" "$SANITIZER" --tool "$tool" --report-api-errors no \
    $([ "$tool" = memcheck ] && echo --leak-check no) --error-exitcode 3 \
    "$WORK/bin/test_cuda_engine" --gtest_filter="$filter" >"$log" 2>&1
  rc=$?
  grep -E '^========= (ERROR SUMMARY|Invalid|Uninitialized|Program hit|Error)' "$log" | head -n 20
  grep -E '^\[ +(OK|FAILED) +\]' "$log" | head -n 8
  # Errors reported count whatever the exit (a timeout or a test failing under the sanitizer
  # still leaves them in the log). initcheck also sees cuBLAS and cuDNN read workspace they
  # never wrote, by design: only reports whose stack names our code fail the check.
  ours=$(grep -A4 -E '^========= (Invalid|Uninitialized)' "$log" | grep -c 'speakerseg::')
  if [ "$tool" = memcheck ] && { [ $rc = 3 ] ||
    grep -qE '^========= (Invalid|Uninitialized|ERROR SUMMARY: [1-9])' "$log"; }; then
    say "memcheck: errors found (log: $log)"
    test_rc=1
  elif [ "$tool" = initcheck ] && [ "$ours" -gt 0 ]; then
    say "initcheck: $ours reads of unwritten memory in our code (log: $log)"
    test_rc=1
  else
    [ $rc = 3 ] && say "$tool: errors only in library code (cuBLAS/cuDNN), not counted (log: $log)"
    case $rc in
      0 | 3) say "$tool: no error in our code" ;;
      124) say "$tool: no error in our code in the $seconds s it had; stopped unfinished" ;;
      1) say "$tool: no error in our code; a test failed under the sanitizer (log: $log)" ;;
      *) say "$tool: exit $rc, see $log (the sanitizer may not work on this runtime)" ;;
    esac
  fi
}
left=$((start_build + BUDGET + 50 - SECONDS))
if [ "${GPU_CHECK_SANITIZER:-1}" = 1 ] && [ -n "$SANITIZER" ] && [ $left -gt 60 ]; then
  sanitize memcheck $((left * 3 / 5 - 5)) \
    '*CudaParity*first_window_*_eager:*CudaParity*first_window_standard_graphs:CudaEngine.AlternatingBatchSizesKeepResults'
  left=$((start_build + BUDGET + 50 - SECONDS))
  if [ $left -gt 40 ]; then
    sanitize initcheck $((left - 10)) \
      '*CudaParity*first_window_standard_eager:*CudaParity*first_window_persist_static_small_h_graphs:CudaEngine.EveryBatchSizeRunsAsItsClass' \
      SPEAKERSEG_CUDA_TEST_NO_NAN_FILL=1
  else
    say "initcheck: skipped (time budget)"
  fi
elif [ -z "$SANITIZER" ]; then
  say "memcheck, initcheck: compute-sanitizer not found, skipped"
else
  say "memcheck, initcheck: skipped (time budget or GPU_CHECK_SANITIZER=0)"
fi
say "done in $SECONDS s"
[ $test_rc = 0 ] && exit 0 || exit 1
