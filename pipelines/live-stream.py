#!/usr/bin/python3
"""Follows a live network stream (RTSP, HTTP, HLS, SRT: anything uridecodebin plays) and prints
every speaker change as a JSON line, as speaker-changes.py does, for as long as it runs: when the
feed fails (the server closes the connection, a camera reboots, an encoder restarts, the network
goes away) it connects again with backoff and analysis resumes where the audio does.

  pipelines/live-stream.py URI [--rtsp-latency MS] [--retry-max S] [--once] [NAME=VALUE ...]

NAME=VALUE arguments are properties of speakerchange (e.g. latency=1.5 voiceprints=people.json).
Each change also says its "lag": seconds from its time to its announcement on the pipeline
clock, which is what a viewer waits (`delay` counts stream time: how much newer audio decided
it; inference, and a remote engine's outage, come on top).
A lost feed is announced as the element announces one that stalls: the changes its audio still
holds, then {"speaker": "", ..., "stalled": true}, once the clock has run the jitter buffer +
`latency` + `stall-margin` past its last audio (a feed back before then only leaves a gap). The
element and its speaker labels outlive the source: with identity by voice (on where the voice
model is installed) people keep their labels across reconnections. stderr says when the feed is
lost (and why), each attempt, and when audio flows again. --once exits at the first failure
instead (status 1), or at the end of the stream (status 0).

RTSP goes through rtspsrc, whose jitter buffer holds each packet for --rtsp-latency ms (default
200; rtspsrc's own default is 2000) before decoding: raise it on a lossy network. Only the audio
streams of a camera are set up."""
import argparse
import json
import sys
import time

import speakerchange_app as app  # before GStreamer: it points GStreamer at the build's plugin
from gi.repository import GLib, Gst

FIRST_RETRY = 1.0  # seconds; doubled after each failed attempt, up to --retry-max


class Feed:
    """The source part of the pipeline (uridecodebin in a bin with one audio ghost pad), made
    again for every connection while the rest of the pipeline, the element included, runs on."""

    def __init__(self, pipeline, sink_pad, uri, rtsp_latency, on_lost, on_audio):
        self.pipeline, self.sink_pad, self.uri = pipeline, sink_pad, uri
        self.rtsp_latency, self.on_lost, self.on_audio = rtsp_latency, on_lost, on_audio
        self.bin = None
        self.count = 0
        # Every element of this and the last connections, with its feed bin: messages that their
        # elements post while they shut down (some already out of their bin) are traced to them.
        self.owner = {}

    def of(self, obj):
        """The feed bin `obj` belongs to (this connection's or an earlier one's), or None."""
        return self.owner.get(obj)

    def connect(self):
        self.count += 1
        self.bin = Gst.Bin.new(f"feed-{self.count}")
        self.owner = {e: b for e, b in self.owner.items() if b.get_name() == f"feed-{self.count - 1}"}
        self.owner[self.bin] = self.bin
        self.bin.connect("deep-element-added", lambda b, _sub, e: self.owner.__setitem__(e, b))
        ghost = Gst.GhostPad.new_no_target("src", Gst.PadDirection.SRC)
        self.bin.add_pad(ghost)
        if self.uri.split("://")[0] in ("rtsp", "rtsps", "rtspu", "rtspt"):
            # rtspsrc itself, not through uridecodebin: the live source must answer for the bin
            # (NO_PREROLL), or a bin added to a playing pipeline waits for data that only comes
            # once it plays. Only the audio streams are set up.
            source = Gst.ElementFactory.make("rtspsrc")
            source.set_property("location", self.uri)
            source.set_property("latency", self.rtsp_latency)
            source.connect("select-stream", lambda _s, _n, caps: caps.get_structure(0).get_string("media") == "audio")
            decoder = Gst.ElementFactory.make("decodebin")
            self.bin.add(source)
            self.bin.add(decoder)
            source.connect("pad-added", lambda _s, pad: pad.link(decoder.get_static_pad("sink")))
        else:
            decoder = Gst.ElementFactory.make("uridecodebin")
            decoder.set_property("uri", self.uri)
            self.bin.add(decoder)
        decoder.connect("pad-added", self._pad_added, ghost)
        # The feed's end is its loss: the element must not see EOS, which would end its stream.
        ghost.add_probe(Gst.PadProbeType.EVENT_DOWNSTREAM, self._probe, self.bin)
        ghost.add_probe(Gst.PadProbeType.BUFFER, self._probe, self.bin)
        self.pipeline.add(self.bin)
        ghost.link(self.sink_pad)
        self.bin.sync_state_with_parent()

    def _pad_added(self, _decoder, pad, ghost):
        caps = pad.get_current_caps() or pad.query_caps(None)
        if caps and caps.get_size() and caps.get_structure(0).get_name().startswith("audio/") and ghost.get_target() is None:
            ghost.set_target(pad)

    def _probe(self, _pad, info, owner):
        if info.type & Gst.PadProbeType.BUFFER:
            GLib.idle_add(self.on_audio, owner)
            return Gst.PadProbeReturn.REMOVE  # once per connection is enough
        event = info.get_event()
        if event.type == Gst.EventType.EOS:
            GLib.idle_add(self.on_lost, owner, "the stream ended (the server closed it)", True)
            return Gst.PadProbeReturn.DROP
        return Gst.PadProbeReturn.OK

    def disconnect(self):
        old, self.bin = self.bin, None
        if old is not None:
            old.set_state(Gst.State.NULL)
            self.pipeline.remove(old)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("uri")
    ap.add_argument("--rtsp-latency", type=int, default=200, metavar="MS")
    ap.add_argument("--retry-max", type=float, default=30.0, metavar="S",
                    help="longest wait between two attempts to connect (default 30 s)")
    ap.add_argument("--once", action="store_true", help="exit when the feed fails or ends")
    ap.add_argument("props", nargs="*", help="NAME=VALUE properties of speakerchange")
    a = ap.parse_intermixed_args()
    if a.rtsp_latency < 0 or a.retry_max < FIRST_RETRY:
        sys.exit(f"live-stream: --rtsp-latency takes milliseconds >= 0 and --retry-max seconds >= {FIRST_RETRY:g}")

    Gst.init(None)
    if Gst.ElementFactory.find("speakerchange") is None:
        sys.exit("speakerchange: plugin not found: run scripts/setup.sh (or set GST_PLUGIN_PATH)")
    pipeline = Gst.parse_launch(
        "audioconvert name=conv ! audioresample ! audio/x-raw,format=F32LE,rate=16000,channels=1 ! "
        "speakerchange name=sc mode=latency ! fakesink sync=true")
    sc = pipeline.get_by_name("sc")
    try:
        app.set_all(sc, a.props)
    except ValueError as e:
        sys.exit(f"speakerchange: {e}")
    reidentify = sc.get_property("reidentify")
    loop = GLib.MainLoop()
    state = {"retry": FIRST_RETRY, "attempt": 0, "flowing": False, "status": 0, "lost_at": None}

    def connect():
        state["attempt"] += 1
        state["flowing"] = False
        app.note(f"live-stream: connecting to {a.uri} (attempt {state['attempt']})")
        feed.connect()
        return False

    def lost(owner, why, ended=False):
        if owner is not feed.bin:  # an older connection's late news
            return False
        feed.disconnect()
        if a.once:
            app.note(f"live-stream: {why}")
            state["status"] = 0 if ended else 1
            loop.quit()
            return False
        if state["lost_at"] is None:
            state["lost_at"] = time.monotonic()
        wait = state["retry"]
        app.note(f"live-stream: feed lost: {why}; connecting again in {wait:g} s")
        state["retry"] = min(wait * 2, a.retry_max)
        GLib.timeout_add(int(wait * 1000), connect)
        return False

    def audio(owner):
        if owner is feed.bin and not state["flowing"]:
            state["flowing"] = True
            state["retry"] = FIRST_RETRY
            if state["lost_at"] is None:
                app.note(f"live-stream: audio flows from {a.uri}")
            else:
                # What was not analysed: the time without a feed (the stall's announcement came
                # latency + stall-margin after its last audio, within it).
                app.note(f"live-stream: audio flows again from {a.uri}, after "
                         f"{time.monotonic() - state['lost_at']:.1f} s without a feed")
                state["lost_at"] = None
        return False

    feed = Feed(pipeline, pipeline.get_by_name("conv").get_static_pad("sink"), a.uri, a.rtsp_latency, lost, audio)

    def on_message(_bus, msg):
        name = msg.get_structure().get_name() if msg.type == Gst.MessageType.ELEMENT else None
        if name == "speaker-change":
            print(json.dumps(app.change(msg.get_structure(), reidentify, pipeline)), flush=True)
        elif name == "speaker-change-revision":
            print(json.dumps(app.revision(msg.get_structure())), flush=True)
        elif name == "speaker-change-unanalysed":
            app.note(app.unanalysed(msg.get_structure())[0])
        elif msg.type == Gst.MessageType.WARNING:
            if feed.of(msg.src) is None:
                app.note(app.warning(msg))
            elif feed.of(msg.src) is feed.bin:
                app.note(app.warning(msg, "live-stream"))
        elif msg.type == Gst.MessageType.ERROR:
            err, debug = msg.parse_error()
            source = feed.of(msg.src)
            if source is not None:
                lost(source, err.message)  # an earlier connection's: ignored there
            else:
                app.note(f"speakerchange: {err.message}" + (f" ({debug})" if debug else ""))
                state["status"] = 1
                loop.quit()

    bus = pipeline.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    connect()
    pipeline.set_state(Gst.State.PLAYING)
    try:
        loop.run()
    except KeyboardInterrupt:
        pass
    pipeline.set_state(Gst.State.NULL)
    sys.exit(state["status"])


if __name__ == "__main__":
    main()
