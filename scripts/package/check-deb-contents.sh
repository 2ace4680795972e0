#!/usr/bin/env bash
# Checks what the built packages hold, without installing them (CI runs this after build-deb.sh;
# scripts/package/check-deb.sh installs them on a clean Debian 12). Usage:
#   scripts/package/check-deb-contents.sh [DIR]   (DIR: where the .deb files are; default build-deb)
# Fails, naming the file or field, when the plugin is not where GStreamer looks, a network or its
# licence is missing, or the Depends that dpkg-shlibdeps should have filled in are not there.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build-deb}
status=0

one_deb() {  # the single .deb of package $1
  local debs=("$dir/$1"_*.deb)
  if [ ${#debs[@]} -ne 1 ] || ! [ -f "${debs[0]}" ]; then
    echo "check-deb-contents: not one $dir/$1_*.deb" >&2; exit 1
  fi
  echo "${debs[0]}"
}
expect_file() {  # expect_file DEB PATH: PATH (no leading /) is in DEB
  dpkg-deb --contents "$1" | awk '{print $6}' | grep -qx "./$2" ||
    { echo "check-deb-contents: $(basename "$1") lacks /$2" >&2; status=1; }
}
expect_depends() {  # expect_depends DEB NAME: a package whose name starts with NAME is among DEB's Depends
  dpkg-deb --field "$1" Depends | tr ',' '\n' | grep -q "^ *$2" ||
    { echo "check-deb-contents: $(basename "$1") does not depend on $2" >&2; status=1; }
}

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
plugin=$(one_deb gstreamer1.0-speakerchange)
lib=$(one_deb libgstspeakerchange-result-1.0-0)
dev=$(one_deb libgstspeakerchange-result-1.0-dev)

expect_file "$plugin" "usr/lib/$multiarch/gstreamer-1.0/libgstspeakerchange.so"
for f in segmentation-3.0.onnx LICENSE-segmentation-3.0.txt voice-encoder-ge2e.onnx \
         LICENSE-voice-encoder-ge2e.txt pipelines/speaker-changes.py pipelines/live-stream.py \
         pipelines/speakerchange_app.py; do
  expect_file "$plugin" "usr/share/speakerchange/$f"
done
expect_file "$plugin" usr/bin/speakerseg
expect_file "$plugin" usr/bin/speaker-changes
expect_file "$plugin" usr/share/doc/gstreamer1.0-speakerchange/copyright
# ${shlibs:Depends}: the libraries the plugin links (oneDNN, GStreamer, gRPC), found by
# dpkg-shlibdeps; named without their soname versions (bookworm: libdnnl2, libgrpc++1.51).
for p in libdnnl libgstreamer1.0-0 libgstreamer-plugins-base1.0-0 libgrpc++ \
         libgstspeakerchange-result-1.0-0; do
  expect_depends "$plugin" "$p"
done
expect_file "$lib" "usr/lib/$multiarch/libgstspeakerchange-result-1.0.so.0"
expect_file "$dev" "usr/include/gstreamer-1.0/gst/speakerchange/speakerchange-result.h"
expect_file "$dev" "usr/lib/$multiarch/pkgconfig/speakerchange-1.0.pc"
# Nothing of the CUDA engine: this package builds without it (debian/rules).
if dpkg-deb --contents "$plugin" | grep -q speakerseg-cuda; then
  echo "check-deb-contents: $(basename "$plugin") holds the CUDA module" >&2; status=1
fi

[ $status -eq 0 ] && echo "check-deb-contents: $(basename "$plugin"), $(basename "$lib"), $(basename "$dev") OK"
exit $status
