#!/usr/bin/env bash
# The test command: set up (idempotent), then every test in a release build (with the CUDA engine
# where the toolkit is installed; its GPU tests skip without a GPU), again in an AddressSanitizer +
# UBSan build, and the CUDA-dependent ones in a build without CUDA. Ends with one
# "N passed, N failed, N skipped" line.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

status=0
meson test -C build --print-errorlogs || status=1

if ! [ -f build-asan/build.ninja ]; then
  meson setup build-asan --buildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false
fi
# halt_on_error: a sanitizer report fails the test instead of scrolling past.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  meson test -C build-asan --print-errorlogs || status=1

# A build without the CUDA engine must keep building and passing where the toolkit is installed:
# all of it builds, and the tests of what differs without CUDA run (the tool, the element and the
# programs around them; the core's suites are the same code as in the build above).
if ! [ -f build-nocuda/build.ninja ]; then
  meson setup build-nocuda --buildtype=release -Dcuda=disabled
fi
meson compile -C build-nocuda
nocuda_tests=$(meson test -C build-nocuda --list 2>/dev/null |
  grep -E -x 'model_loader|speakerseg_cli|speakerchange_element|speakerchange_result|pipeline_script|example_.*')
# shellcheck disable=SC2086  # one test name per word
meson test -C build-nocuda --print-errorlogs $nocuda_tests || status=1

# Every test case counts: the cases of a GoogleTest program (its XML report, GPU cases that skip
# without a device included) one by one, any other test program as one.
.venv/bin/python3 - build build-asan build-nocuda <<'PY'
import json, pathlib, sys
import xml.etree.ElementTree as ET
counts = {"passed": 0, "failed": 0, "skipped": 0}
for build in map(pathlib.Path, sys.argv[1:]):
    for line in open(build / "meson-logs" / "testlog.json"):
        r = json.loads(line)
        report = build / f"{r['name']}.xml"
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
