#!/usr/bin/env bash
# One fuzz target for $FUZZ_SECONDS (default 20) seconds: first every committed input (the
# corpus, crash regressions included) and every generated seed, then new inputs, which go to
# WORK (kept between runs). A crash, leak, out-of-memory, hang (over 60 s on one input) or
# failed check fails the run and leaves the input in WORK/../artifacts/, named in the output.
#   run_fuzzer.sh TARGET WORK CORPUS SEEDS
set -uo pipefail
target=$1 work=$2 corpus=$3 seeds=$4
mkdir -p "$work" "$work/../artifacts" "$seeds"
# Full stacks at allocation: GLib has no frame pointers, and a suppression must see the GStreamer
# frame above g_malloc0.
export ASAN_OPTIONS="fast_unwind_on_malloc=0:malloc_context_size=64${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# libFuzzer's own exit code for a finding is 77, which meson reads as "skipped": every finding
# exits 1 here.
"$target" -max_total_time="${FUZZ_SECONDS:-20}" -timeout=60 -rss_limit_mb=6144 \
  -max_len="${FUZZ_MAX_LEN:-65536}" -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix="$work/../artifacts/" "$work" "$corpus" "$seeds"
rc=$?
[ $rc -eq 0 ] || { echo "run_fuzzer: $(basename "$target") failed (exit $rc); inputs: $work/../artifacts/" >&2; exit 1; }
