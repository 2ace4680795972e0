#!/usr/bin/env bash
# Follows a network stream (HTTP, HLS, RTSP: anything uridecodebin plays) in real time and prints
# every speaker change. Usage: pipelines/live-stream.sh URI [speakerchange properties...]
#
# RTSP goes through rtspsrc, whose jitter buffer holds every packet for its `latency` before
# decoding: 2 s by default, which comes on top of the element's own delay (README, "Live lag").
# RTSP_LATENCY (milliseconds, default 200) sets it: raise it for a lossy or jittery network,
# lower it on a LAN. uridecodebin cannot set it (only its source-setup signal reaches rtspsrc,
# and gst-launch has no signals), so rtsp:// URIs get rtspsrc ! decodebin.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
plugin=${SPEAKERCHANGE_PLUGIN_DIR:-$here/build/gst/speakerchange}
[ -d "$plugin" ] && export GST_PLUGIN_PATH="$plugin${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
uri=${1:?usage: [RTSP_LATENCY=ms] $0 URI [speakerchange properties...]}
shift
case "$uri" in
  rtsp://* | rtsps://* | rtspu://* | rtspt://*)
    latency=${RTSP_LATENCY:-200}
    [[ $latency =~ ^[0-9]+$ ]] || { echo "RTSP_LATENCY takes milliseconds, got '$latency'" >&2; exit 2; }
    # The audio stream only: a camera's video would otherwise reach decodebin first.
    source=(rtspsrc location="$uri" latency="$latency" ! application/x-rtp,media=audio ! decodebin)
    ;;
  *)
    source=(uridecodebin uri="$uri")
    ;;
esac
exec gst-launch-1.0 -m "${source[@]}" ! audioconvert ! audioresample ! \
  speakerchange mode=latency "$@" ! fakesink sync=true
