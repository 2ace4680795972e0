#!/usr/bin/env bash
# Installs the built packages on a clean Debian 12 and runs the plugin from them: apt-get installs
# build-deb/*.deb (so their Depends come from Debian's mirror) into a fresh debootstrap root with no
# checkout, no build tree and no GST_PLUGIN_PATH; there `gst-inspect-1.0 speakerchange`, the README's
# main example (speaker-changes on sample.wav, whose output must be the README's lines), its
# enrolment of two speakers with speakerseg (the named lines must be the README's too) and its
# gst-launch-1.0 pipeline must work. Usage, as root, after scripts/package/build-deb.sh:
#   scripts/package/check-deb.sh [DIR]   (DIR: where the .deb files are; default build-deb)
# Run by hand, not by CI: the first run downloads a Debian base system (debootstrap, ~200 MB
# unpacked, kept in $CHECK_DIR/base and copied afresh for every run). Environment: CHECK_DIR
# (default /var/tmp/speakerchange-deb-check), MIRROR (default http://deb.debian.org/debian),
# SAMPLE (default ../shared/data/pyannote-debug/sample.wav).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(realpath "${1:-build-deb}")
check_dir=${CHECK_DIR:-/var/tmp/speakerchange-deb-check}
mirror=${MIRROR:-http://deb.debian.org/debian}
sample=${SAMPLE:-../shared/data/pyannote-debug/sample.wav}
base=$check_dir/base
root=$check_dir/root

[ "$(id -u)" -eq 0 ] || { echo "check-deb: needs root (debootstrap, chroot, mount)" >&2; exit 1; }
command -v debootstrap >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
scripts/package/check-deb-contents.sh "$dir"

# The base system once (made under another name, so an interrupted run never leaves half a one).
if ! [ -f "$base/etc/debian_version" ]; then
  echo "check-deb: debootstrap bookworm into $base"
  rm -rf "$base.part"
  debootstrap --variant=minbase bookworm "$base.part" "$mirror" >"$check_dir/debootstrap.log"
  mv "$base.part" "$base"
fi

# A fresh copy for every run, with /proc mounted while it runs (unmounted however the run ends).
cleanup() { mountpoint -q "$root/proc" && umount "$root/proc"; return 0; }
trap cleanup EXIT
cleanup
rm -rf "$root"
cp -a "$base" "$root"
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/tmp/debs"
cp "$dir"/gstreamer1.0-speakerchange_*.deb "$dir"/libgstspeakerchange-result-1.0-0_*.deb "$root/tmp/debs/"
cp "$sample" "$root/tmp/sample.wav"

# Everything inside runs with a clean environment: nothing of this machine's (GST_PLUGIN_PATH,
# SPEAKERCHANGE_MODEL, ...) reaches it.
in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 chroot "$root" "$@"; }

echo "check-deb: apt-get install ./tmp/debs/*.deb (in a clean bookworm root)"
in_root apt-get update -qq
# Use-Pty=0: the root has no /dev/pts for dpkg's progress log.
in_root env DEBIAN_FRONTEND=noninteractive sh -c \
  'apt-get install -y -qq -o Dpkg::Use-Pty=0 /tmp/debs/*.deb' >"$check_dir/apt.log" 2>&1 ||
  { tail -n 30 "$check_dir/apt.log" >&2; echo "check-deb: FAIL: apt-get install (log: $check_dir/apt.log)" >&2; exit 1; }
in_root dpkg-query -W gstreamer1.0-speakerchange libgstspeakerchange-result-1.0-0

echo "check-deb: no checkout: $(in_root sh -c 'ls -d /work /root/* 2>/dev/null | wc -l') files under /work and /root"
echo "check-deb: \$ gst-inspect-1.0 speakerchange   (GST_PLUGIN_PATH ${GST_PLUGIN_PATH+set here, }unset in the root)"
in_root gst-inspect-1.0 speakerchange >"$check_dir/gst-inspect.txt"
head -n 25 "$check_dir/gst-inspect.txt"
grep -A3 '^  model ' "$check_dir/gst-inspect.txt"

# The README's first fenced block without a language (its output, not its commands) after the
# line that holds $1.
readme_output() {
  awk -v pat="$1" '
    /^```/ { if (!fenced) { fenced = 1; if (seen && $0 == "```") printing = 1 }
             else { fenced = 0; if (printing) exit }
             next }
    printing { print }
    index($0, pat) { seen = 1 }' README.md
}
# expect_readme NAME PATTERN: $check_dir/NAME.jsonl is the README's output after PATTERN's line.
expect_readme() {
  readme_output "$2" >"$check_dir/$1.readme.jsonl"
  if ! [ -s "$check_dir/$1.readme.jsonl" ] || ! diff "$check_dir/$1.readme.jsonl" "$check_dir/$1.jsonl"; then
    echo "check-deb: FAIL: the output is not the README's (above: diff README installed)" >&2
    exit 1
  fi
}

echo "check-deb: \$ speaker-changes /tmp/sample.wav"
in_root speaker-changes /tmp/sample.wav >"$check_dir/changes.jsonl"
cat "$check_dir/changes.jsonl"
# shellcheck disable=SC2016  # the backquotes are the README's
expect_readme changes 'Its real output on `sample.wav`:'

# The README's enrolment: speakerseg (the models found where the package put them) and the names.
echo "check-deb: \$ speakerseg enroll --name Alice ... ; speakerseg enroll --name Bob ..."
in_root speakerseg enroll --name Alice --input /tmp/sample.wav --start 10.6 --end 14.4 \
  --voiceprints /tmp/people.json
in_root speakerseg enroll --name Bob --input /tmp/sample.wav --start 22.0 --end 27.8 \
  --voiceprints /tmp/people.json
echo "check-deb: \$ speaker-changes /tmp/sample.wav voiceprints=/tmp/people.json"
in_root speaker-changes /tmp/sample.wav voiceprints=/tmp/people.json >"$check_dir/named.jsonl"
cat "$check_dir/named.jsonl"
expect_readme named 'sample.wav voiceprints=/tmp/people.json'

echo "check-deb: \$ gst-launch-1.0 -m filesrc location=/tmp/sample.wav ! wavparse ! audioconvert ! audioresample ! speakerchange ! fakesink"
in_root gst-launch-1.0 -m filesrc location=/tmp/sample.wav ! wavparse ! audioconvert ! \
  audioresample ! speakerchange ! fakesink >"$check_dir/gst-launch.txt"
grep -c 'speaker-change, ' "$check_dir/gst-launch.txt" | sed 's/^/check-deb: speaker-change messages: /'
grep -m2 'speaker-change, ' "$check_dir/gst-launch.txt"
[ "$(grep -c 'speaker-change, ' "$check_dir/gst-launch.txt")" -eq "$(wc -l <"$check_dir/changes.jsonl")" ] || {
  echo "check-deb: FAIL: gst-launch-1.0 announced a different number of changes" >&2; exit 1; }

echo "check-deb: OK: installed from the .deb files, the plugin and the README's examples work on a clean Debian 12"
