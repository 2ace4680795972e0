#!/usr/bin/env bash
# The fuzz targets of tests/fuzz (libFuzzer, with AddressSanitizer and UBSan), built with clang in
# build-fuzz/ and run for N seconds each (default 20): first over the committed corpus
# (tests/fuzz/corpus/TARGET: seeds and every crash found so far) and the seeds made from the
# fetched models and the shared recordings, then on new inputs. Ends with one line per target
# (runs, coverage, corpus) and exits non-zero if any found something; the input is then under
# build-fuzz/tests/fuzz/work/artifacts/ (see docs/reliability.md for what to do with it).
#
#   scripts/fuzz.sh [--seconds N] [TARGET...]
#
# Targets: fuzz_model_loader fuzz_audio_file fuzz_voiceprints fuzz_result_parser fuzz_element.
# Needs what scripts/setup.sh installs (clang, libFuzzer, the models, .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=20
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found: run scripts/setup.sh" >&2; exit 2; }
done
if ! [ -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz --buildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled -Dtests=false -Dfuzzing=true >/dev/null
fi
meson compile -C build-fuzz >/dev/null
status=0
FUZZ_SECONDS=$seconds meson test -C build-fuzz --suite fuzz --print-errorlogs "${targets[@]}" || status=1
# One line per target from libFuzzer's closing statistics.
python3 - build-fuzz/meson-logs/testlog.json <<'PY'
import json, re, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    text = (r.get("stdout") or "") + (r.get("stderr") or "")
    done = re.findall(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)", text)
    execs = re.findall(r"stat::number_of_executed_units: (\d+)", text)
    rate = re.findall(r"stat::average_exec_per_sec:\s+(\d+)", text)
    if done:
        runs, cov, ft, corp, size = done[-1]
        print(f"fuzz: {r['name']:20s} {r['result']:5s} {runs:>8s} runs ({rate[-1] if rate else '?'}/s) in "
              f"{r['duration']:.0f} s, coverage {cov} edges, {ft} features, corpus {corp} inputs ({size})")
    else:
        print(f"fuzz: {r['name']:20s} {r['result']:5s} {execs[-1] if execs else '?'} runs, then stopped: see "
              f"build-fuzz/meson-logs/testlog.txt")
PY
exit $status
