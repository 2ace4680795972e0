#!/usr/bin/env python3
"""The speaker changes of a media file, from speakerchange's bus messages: print_changes.py FILE"""
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

Gst.init(None)
pipeline = Gst.parse_launch("uridecodebin name=src ! audioconvert ! audioresample ! speakerchange ! fakesink")
pipeline.get_by_name("src").set_property("uri", Gst.filename_to_uri(sys.argv[1]))
pipeline.set_state(Gst.State.PLAYING)
wanted = Gst.MessageType.ELEMENT | Gst.MessageType.EOS | Gst.MessageType.ERROR
while (msg := pipeline.get_bus().timed_pop_filtered(Gst.CLOCK_TIME_NONE, wanted)).type != Gst.MessageType.EOS:
    if msg.type == Gst.MessageType.ERROR:
        break
    s = msg.get_structure()
    if s.get_name() == "speaker-change":  # fields: docs/element.md
        print(f"{s['timestamp'] / Gst.SECOND:8.3f} s  {s['previous-speaker'] or 'nobody'} -> "
              f"{s['speaker'] or 'nobody'}  active [{','.join(s['active-speakers'])}]  "
              f"confidence {s['confidence']:.3f}  delay {s['delay'] / Gst.SECOND:.3f} s")
    elif s.get_name() == "speaker-change-revision":  # the change at that time was somebody else
        print(f"{s['timestamp'] / Gst.SECOND:8.3f} s  revised: {s['previous-speaker']} was "
              f"{s['speaker']}  delay {s['delay'] / Gst.SECOND:.3f} s")
pipeline.set_state(Gst.State.NULL)
if msg.type == Gst.MessageType.ERROR:
    sys.exit(f"print_changes: {msg.parse_error()[0].message}")
