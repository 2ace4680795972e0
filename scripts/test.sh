#!/usr/bin/env bash
# The test command: set up (idempotent), then every test in a release build (with the CUDA engine
# where the toolkit is installed; its GPU tests skip without a GPU), the GPU check's build and tests
# made exactly as on a GPU machine (scripts/gpu/gpu-check.sh --build-only), again in an
# AddressSanitizer + UBSan build without the CUDA engine (so that a build without it keeps building
# and passing), the scheduler's threads under ThreadSanitizer, and each fuzz target briefly over its
# corpus (scripts/fuzz.sh), and the Debian packages (scripts/package/build-deb.sh). Ends with one
# "N passed, N failed, N skipped" line.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

status=0
meson test -C build --print-errorlogs || status=1

# The GPU check builds with meson from the bundle (its packages, its meson wheel, -Dcuda=enabled)
# and runs its suites: what would stop the run on the day a GPU is lent stops CI instead. Where
# no CUDA toolkit is installed there is nothing to build it with: one skipped case says so.
gpu_check_reports=skip:gpu-check
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  rm -f build-gpu-check/build/*.xml
  scripts/gpu/gpu-bundle.sh && scripts/gpu/gpu-check.sh --build-only || status=1
  gpu_check_reports=$(ls build-gpu-check/build/*.xml 2>/dev/null || echo build-gpu-check/build/missing.xml)
else
  echo "test.sh: no CUDA toolkit (nvcc): the GPU check's build is not tried"
fi

# -O1 with line tables only (-g1) halves this build's compile time; the numeric kernels keep -O2,
# without which the sanitized tests take twice as long, and run sanitized in their own suites
# only: the others link them plain (core/meson.build).
if ! [ -f build-asan/build.ninja ]; then
  meson setup build-asan --buildtype=debugoptimized -Doptimization=1 -Dcpp_args=-g1 -Dc_args=-g1 \
    -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled
fi
# halt_on_error: a sanitizer report fails the test instead of scrolling past.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  meson test -C build-asan --print-errorlogs || status=1

# The scheduling threads under ThreadSanitizer (the shared scheduler with many channels
# submitting, flushing, failing and stopping; the engine pool; the per-stream worker; the voice
# encoder shared between channels; the helpers that stitch a batch's channels): the core and those
# suites, on the release build's reference data. No suppressions: a report fails the run.
if ! [ -f build-tsan/build.ninja ]; then
  meson setup build-tsan --buildtype=debugoptimized -Db_sanitize=thread -Dcuda=disabled \
    -Dgst=disabled >/dev/null
fi
meson compile -C build-tsan tests/test_shared_segmenter tests/test_helper_team >/dev/null
for suite in shared_segmenter helper_team; do
  rm -f build-tsan/$suite.xml
  SPEAKERSEG_MODEL=$PWD/models/segmentation-3.0.onnx SPEAKERSEG_REFERENCE_DIR=$PWD/build/tests/reference \
  SPEAKERSEG_VOICE_MODEL=$PWD/models/voice-encoder-ge2e.onnx \
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
    build-tsan/tests/test_$suite --gtest_output=xml:build-tsan/$suite.xml ||
    { echo "test.sh: $suite under ThreadSanitizer failed"; status=1; }
done

# Every fuzz target for a few seconds: the committed corpus (crash regressions included), then
# new inputs. Long runs: scripts/fuzz.sh --seconds N (docs/reliability.md).
scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-10}" || status=1

# The Debian packages (docs/packaging.md), without debug symbols, and what they hold: one case,
# passed when both pass (no report: failed). Installing them on a clean Debian 12 is
# scripts/package/check-deb.sh, run by hand.
mkdir -p build-deb && rm -f build-deb/packages.xml
if DEB_BUILD_OPTIONS=noautodbgsym scripts/package/build-deb.sh >build-deb/build.log 2>&1 &&
   scripts/package/check-deb-contents.sh; then
  echo '<testsuite><testcase name="debian-packages"/></testsuite>' >build-deb/packages.xml
else
  tail -n 30 build-deb/build.log; echo "test.sh: the Debian packages failed (build-deb/build.log)"; status=1
fi

# Every test case counts: the cases of a GoogleTest program (its XML report, GPU cases that skip
# without a device included) one by one, any other test program as one.
.venv/bin/python3 - build $gpu_check_reports build-asan build-fuzz build-tsan/shared_segmenter.xml \
  build-tsan/helper_team.xml \
  build-deb/packages.xml <<'PY'
import json, pathlib, sys
import xml.etree.ElementTree as ET
counts = {"passed": 0, "failed": 0, "skipped": 0}
for arg in sys.argv[1:]:
    if arg.startswith("skip:"):  # a part that could not run here, counted as one skipped case
        counts["skipped"] += 1
        continue
    arg = pathlib.Path(arg)
    # A meson build's test log, or one GoogleTest report (a missing report: the program never got
    # as far as writing it).
    if arg.suffix == ".xml":
        records = [{"name": arg.stem, "result": "OK" if arg.exists() else "FAIL", "report": arg}]
    else:
        records = [json.loads(line) for line in open(arg / "meson-logs" / "testlog.json")]
    for r in records:
        # meson names a test "project:suite / name" once suites are in use; its report is name.xml.
        report = r.get("report", arg / f"{r['name'].split(' / ')[-1]}.xml")
        cases = ET.parse(report).getroot().iter("testcase") if report.exists() else []
        seen = {"passed": 0, "failed": 0, "skipped": 0}
        for case in cases:
            if case.find("failure") is not None:
                seen["failed"] += 1
            elif case.get("result") == "skipped" or case.find("skipped") is not None:
                seen["skipped"] += 1
            else:
                seen["passed"] += 1
        if r["result"] not in ("OK", "SKIP") and seen["failed"] == 0:
            seen["failed"] += 1  # crashed, timed out, or a program without a report
        if sum(seen.values()) == 0:
            seen["passed" if r["result"] == "OK" else "skipped" if r["result"] == "SKIP" else "failed"] += 1
        for k in counts:
            counts[k] += seen[k]
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
exit $status
