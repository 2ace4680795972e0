#!/usr/bin/env bash
# Follows a live microphone (PulseAudio/PipeWire, or ALSA with SRC=alsasrc) and prints every speaker
# change as it is announced. Extra arguments are speakerchange properties, e.g. latency=1.5.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
plugin=${SPEAKERCHANGE_PLUGIN_DIR:-$here/build/gst/speakerchange}
[ -d "$plugin" ] && export GST_PLUGIN_PATH="$plugin${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
exec gst-launch-1.0 -m "${SRC:-pulsesrc}" ! audioconvert ! audioresample ! \
  speakerchange "$@" ! fakesink sync=true
