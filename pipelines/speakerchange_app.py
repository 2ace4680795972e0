"""What the pipeline scripts share (speaker-changes.py for files, live-stream.py for live feeds):
properties set from NAME=VALUE as gst-launch-1.0 sets them, but checked, and what they print of
the speakerchange element's messages: one JSON object per change or revision on stdout, one line
per warning and unanalysed stretch on stderr. Importing it points GStreamer at the plugin in the
build tree, where there is one (before Gst.init()).

Change: {"time": s, "speaker", "previous", "confidence", "active": [...], "delay": s}, with
"voice" under identity by voice, "lag": s in a live pipeline, "stalled": true for the change that says a live feed stopped,
and "timeline"/"new-timeline" once a new time line began (the element's `timeline` and
`new-timeline` fields: times on one line never go back). Revision: {"revises": s, "speaker",
"was", "delay": s, "voice"}."""
import os
import pathlib
import signal
import sys

# JSON lines into a pipe that closes (| head): end quietly, as command-line tools do.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

# The plugin in the build tree (SPEAKERCHANGE_PLUGIN_DIR, or build/ beside this folder) when there
# is one, ahead of any installed copy; read by Gst.init().
_BUILD_PLUGIN = pathlib.Path(os.environ.get(
    "SPEAKERCHANGE_PLUGIN_DIR", pathlib.Path(__file__).resolve().parent.parent / "build" / "gst" / "speakerchange"))
if _BUILD_PLUGIN.is_dir():
    os.environ["GST_PLUGIN_PATH"] = os.pathsep.join(
        p for p in (str(_BUILD_PLUGIN), os.environ.get("GST_PLUGIN_PATH", "")) if p)

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import GObject, Gst  # noqa: E402


def set_checked(element, name, text):
    """Sets a property from its text as gst-launch-1.0 would, but refuses what gst-launch only
    warns about: an unknown property, a value that does not parse, one out of range."""
    factory = element.get_factory().get_name()
    spec = element.find_property(name)
    if spec is None:
        raise ValueError(f"{factory} has no property '{name}' (gst-inspect-1.0 {factory} lists them)")
    if not spec.flags & GObject.ParamFlags.WRITABLE:
        raise ValueError(f"{factory}'s property '{name}' is read-only")
    t = spec.value_type
    bad = f"{name}={text!r}: "
    if t.is_a(GObject.TYPE_ENUM):
        choices = {v.value_nick: v for v in type(spec.default_value).__enum_values__.values()}
        if text not in choices:
            raise ValueError(bad + f"{name} takes one of {', '.join(choices)}")
        value = choices[text]
    elif t == GObject.TYPE_BOOLEAN:
        words = {"true": True, "yes": True, "1": True, "on": True,
                 "false": False, "no": False, "0": False, "off": False}
        if text.lower() not in words:
            raise ValueError(bad + f"{name} takes true or false")
        value = words[text.lower()]
    elif t in (GObject.TYPE_DOUBLE, GObject.TYPE_FLOAT, GObject.TYPE_INT, GObject.TYPE_UINT,
               GObject.TYPE_INT64, GObject.TYPE_UINT64, GObject.TYPE_LONG, GObject.TYPE_ULONG):
        integer = t not in (GObject.TYPE_DOUBLE, GObject.TYPE_FLOAT)
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise ValueError(bad + f"{name} takes {'a whole number' if integer else 'a number'}") from None
        if not spec.minimum <= value <= spec.maximum:
            raise ValueError(bad + f"{name} must be from {spec.minimum:g} to {spec.maximum:g}")
    elif t == GObject.TYPE_STRING:
        value = text
    else:
        Gst.util_set_object_arg(element, name, text)
        return
    element.set_property(name, value)


def set_all(element, props):
    """set_checked() for each NAME=VALUE of `props`."""
    for prop in props:
        name, eq, value = prop.partition("=")
        if not eq:
            raise ValueError(f"{prop!r}: properties are given as NAME=VALUE")
        set_checked(element, name, value)


def change(s, reidentify, live_pipeline=None):
    """A speaker-change structure as printed; with the live pipeline it came from, also its "lag"
    (see lag())."""
    active = s.get_value("active-speakers")
    out = {
        "time": round(s.get_value("timestamp") / Gst.SECOND, 3),
        "speaker": s.get_string("speaker"),
        "previous": s.get_string("previous-speaker"),
        "confidence": round(s.get_double("confidence")[1], 3),
        "active": list(active) if active is not None else [],
        "delay": round(s.get_value("delay") / Gst.SECOND, 3),
    }
    if reidentify:
        out["voice"] = round(s.get_double("voice-score")[1], 3)
    if s.get_boolean("stalled")[1]:
        out["stalled"] = True
    ok, line = s.get_uint("timeline")
    if ok and line:
        out["timeline"] = line
    if s.get_string("new-timeline"):
        out["new-timeline"] = s.get_string("new-timeline")
    waited = lag(live_pipeline, s) if live_pipeline is not None else None
    if waited is not None:
        out["lag"] = waited
    return out


def lag(pipeline, s):
    """Seconds from a change's running time to now on the pipeline's clock: what a viewer of a
    live pipeline waited for it. `delay` counts stream time (how much newer audio decided the
    change); inference, and a remote engine's outage, come on top of it here."""
    running = s.get_value("running-time")
    clock = pipeline.get_clock()
    if clock is None or running == Gst.CLOCK_TIME_NONE:
        return None
    return round((clock.get_time() - pipeline.get_base_time() - running) / Gst.SECOND, 3)


def revision(s):
    """A speaker-change-revision structure as printed."""
    return {
        "revises": round(s.get_value("timestamp") / Gst.SECOND, 3),
        "speaker": s.get_string("speaker"),
        "was": s.get_string("previous-speaker"),
        "delay": round(s.get_value("delay") / Gst.SECOND, 3),
        "voice": round(s.get_double("voice-score")[1], 3),
    }


def note(text):
    """One line on stderr; on a terminal, over a progress line (redrawn on its next tick)."""
    print(("\r\033[K" if sys.stderr.isatty() else "") + text, file=sys.stderr, flush=True)


def unanalysed(s):
    """The line a speaker-change-unanalysed message gets, and its seconds."""
    seconds = s.get_double("unanalysed-seconds")[1]
    stretch = f"{seconds:.1f} s of stream time unanalysed ({s.get_uint64('unanalysed-windows')[1]} windows dropped)"
    if s.get_boolean("engine-available")[1]:
        return f"speakerchange: the inference engine answers again; {stretch} in all", seconds
    return f"speakerchange: {stretch} so far: {s.get_string('reason')}", seconds


def warning(msg, who="speakerchange"):
    """The line a WARNING message gets: its text, and the rest of its debug text after the place
    in the source it was posted from."""
    warning, debug = msg.parse_warning()
    more = " ".join(debug.split("\n", 1)[1].split()) if debug and "\n" in debug else ""
    return f"{who}: warning: {warning.message}" + (f" ({more})" if more else "")
