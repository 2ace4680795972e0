#!/usr/bin/python3
"""A real RTSP server on loopback (gst-rtsp-server through GObject introspection) that feeds a
recording live, as a camera or an encoder would: a live source fed at real time, sent as Opus
over RTP. It runs in a process of its own so that a test can freeze it (SIGSTOP/SIGCONT) or kill
it and start another on the same port, the two ways a feed fails in the field.

  rtsp_feed_server.py RECORDING [--port P] [--from SECONDS]

Prints `url rtsp://127.0.0.1:P/feed` once it listens, then `start T` when the recording's sample
at --from (default 0) goes into the server and `end T` after its last one, T being
time.monotonic() (CLOCK_MONOTONIC, the same clock in every process). Before a client plays it
feeds silence; after the recording, nothing (no end of stream either: a feed that is lost).
A frozen server feeds, once thawed, the audio it owes at once with the times of its arrival, as an
encoder with a buffer does; the client sees them compressed."""
import argparse
import sys
import threading
import time
import wave

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("recording")
ap.add_argument("--port", type=int, default=0, help="0: any free port")
ap.add_argument("--from", dest="start", type=float, default=0.0, help="seconds into the recording")
a = ap.parse_args()

with wave.open(a.recording) as w:
    if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (16000, 1, 2):
        sys.exit(f"{a.recording}: want 16 kHz mono 16-bit")
    w.setpos(min(int(a.start * 16000), w.getnframes()))
    pcm = w.readframes(w.getnframes())

Gst.init(None)
server = GstRtspServer.RTSPServer.new()
server.set_address("127.0.0.1")
server.set_service(str(a.port))
factory = GstRtspServer.RTSPMediaFactory.new()
factory.set_launch("( appsrc name=feed is-live=true do-timestamp=true format=time "
                   "caps=audio/x-raw,format=S16LE,rate=16000,channels=1,layout=interleaved ! "
                   "audioconvert ! opusenc ! rtpopuspay name=pay0 pt=96 )")
# Every client gets the same feed; the test has one.
factory.set_shared(True)
played = threading.Event()


def say(line):
    print(line, flush=True)


def feed(appsrc):
    """Silence until a client plays (the payloader's caps, which the stream's description needs,
    come with data), then the recording, 20 ms at a time at real time."""
    chunk = 320 * 2
    tick = time.monotonic()

    def push(data):
        nonlocal tick
        time.sleep(max(0.0, tick - time.monotonic()))
        appsrc.emit("push-buffer", Gst.Buffer.new_wrapped(data))
        tick += len(data) / 2 / 16000

    while not played.is_set():
        push(bytes(chunk))
    # The client's transport is up by then.
    until = time.monotonic() + 0.5
    while tick < until:
        push(bytes(chunk))
    say(f"start {tick:.6f}")
    for i in range(0, len(pcm), chunk):
        push(pcm[i:i + chunk])
    say(f"end {tick:.6f}")


started = []


def on_need_data(appsrc, _length):
    if not started:
        started.append(threading.Thread(target=feed, args=(appsrc,), daemon=True))
        started[0].start()


factory.connect("media-configure", lambda _f, media: media.get_element().get_by_name(
    "feed").connect("need-data", on_need_data))
server.connect("client-connected",
               lambda _s, client: client.connect("play-request", lambda *_: played.set()))
server.get_mount_points().add_factory("/feed", factory)
if server.attach(None) == 0:
    sys.exit(f"cannot listen on 127.0.0.1:{a.port}")
say(f"url rtsp://127.0.0.1:{server.get_bound_port()}/feed")
GLib.MainLoop().run()
