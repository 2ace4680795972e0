#!/usr/bin/env bash
# Builds the Debian packages (debian/) with Debian's own tools: dpkg-buildpackage, dh and meson.
# Usage: scripts/package/build-deb.sh   -> build-deb/*.deb (docs/packaging.md)
#
# Installs what debian/control's Build-Depends lists where it is missing (apt-get; root or sudo),
# then builds from a copy of the checkout in build-deb/src, so the checkout gets none of
# dpkg-buildpackage's by-products (obj-*/, debian/.debhelper, debian/<package>/). The copy keeps its
# build folder between runs, so a rebuild compiles only what changed. The networks come from
# models/ where setup has put them, else debian/rules fetches them from PyPI into the checkout's
# models/.cache. Environment: JOBS (default: all cores), DEB_BUILD_OPTIONS (added to
# "nocheck parallel=JOBS"; the packages run no tests at build time: scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/../.."
checkout=$PWD
out=$checkout/build-deb
src=$out/src

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
apt_install() {
  echo "build-deb: installing $*"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
# dpkg-checkbuilddeps itself, then whatever it says is missing (versions stripped: bookworm's are
# the ones debian/control was written against).
if ! command -v dpkg-checkbuilddeps >/dev/null || ! command -v dh >/dev/null; then
  apt_install dpkg-dev debhelper
fi
if ! unmet=$(dpkg-checkbuilddeps 2>&1); then
  # shellcheck disable=SC2046  # one word per package
  apt_install $(sed -n 's/.*Unmet build dependencies: //p' <<<"$unmet" | sed 's/([^)]*)//g; s/|[^ ]*//g')
fi

# The copy: the files git knows of (committed or not, ignored ones left out), and the models as
# files (setup's models/ may hold links; dh_install would copy a link as it is).
# Everything but the build folder goes, debhelper's stamps and logs included (with them dh would
# skip a build it thinks done).
mkdir -p "$src" "$checkout/models/.cache"
find "$src" -mindepth 1 -maxdepth 1 ! -name 'obj-*' -exec rm -rf {} +
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$src"
for m in models/segmentation-3.0.onnx models/voice-encoder-ge2e.onnx; do
  if [ -f "$m" ]; then cp -L --preserve=timestamps "$m" "$src/$m"; fi
done
ln -sfn "$checkout/models/.cache" "$src/models/.cache"

jobs=${JOBS:-$(nproc)}
start=$SECONDS
rm -f "$out"/*.deb "$out"/*.ddeb "$out"/*.buildinfo "$out"/*.changes
# -b: binary packages only; -nc: keep the copy's build folder (debian/rules reuses it).
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$jobs ${DEB_BUILD_OPTIONS:-}" \
  dpkg-buildpackage -b -nc -us -uc)
echo "build-deb: built in $((SECONDS - start)) s:"
ls -l "$out"/*.deb
