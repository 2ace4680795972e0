#!/usr/bin/env bash
# Follows a network stream (HTTP, HLS, RTSP: anything uridecodebin plays) in real time and prints
# every speaker change. Usage: pipelines/live-stream.sh URI [speakerchange properties...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$here/build/gst/speakerchange" ] && export GST_PLUGIN_PATH="$here/build/gst/speakerchange${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
uri=${1:?usage: $0 URI [speakerchange properties...]}
shift
exec gst-launch-1.0 -m uridecodebin uri="$uri" ! audioconvert ! audioresample ! \
  speakerchange mode=latency "$@" ! fakesink sync=true
