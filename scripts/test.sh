#!/usr/bin/env bash
# The test command: set up (idempotent), then every test in a release build (with the CUDA engine
# where the toolkit is installed; its GPU tests skip without a GPU), again in an AddressSanitizer +
# UBSan build, and in a build without CUDA. Ends with one "N passed, N failed, N skipped" line.
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

# A build without the CUDA engine must keep building and passing where the toolkit is installed.
if ! [ -f build-nocuda/build.ninja ]; then
  meson setup build-nocuda --buildtype=release -Dcuda=disabled
fi
meson test -C build-nocuda --print-errorlogs || status=1

.venv/bin/python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json \
  build-nocuda/meson-logs/testlog.json <<'PY'
import json, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)["result"]
        counts["passed" if r == "OK" else "skipped" if r == "SKIP" else "failed"] += 1
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
exit $status
