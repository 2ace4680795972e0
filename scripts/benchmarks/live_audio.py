"""What the live-pipeline scripts (soak.py, capacity.py) share: the plugin in build/, the
recordings as one array, and the process's resident memory.

Importing it puts build/gst/speakerchange (or $SPEAKERCHANGE_PLUGIN_DIR) on GST_PLUGIN_PATH before
GStreamer is loaded, so the scripts use the plugin of the checkout when it is not installed.
"""
import os
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "pyannote-debug"
RATE = 16000

_plugin = pathlib.Path(os.environ.get("SPEAKERCHANGE_PLUGIN_DIR", ROOT / "build" / "gst" / "speakerchange"))
if _plugin.is_dir():
    os.environ["GST_PLUGIN_PATH"] = os.pathsep.join(
        p for p in (str(_plugin), os.environ.get("GST_PLUGIN_PATH", "")) if p)

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402,F401  (re-exported for the scripts)


def read_recordings(data=DATA):
    """Every .wav of the folder (16 kHz mono, 16-bit PCM or float32), one after the other."""
    out = []
    for p in sorted(pathlib.Path(data).glob("*.wav")):
        raw = p.read_bytes()
        fmt = int.from_bytes(raw[20:22], "little")
        i = 12
        while i < len(raw):
            cid, size = raw[i:i + 4], int.from_bytes(raw[i + 4:i + 8], "little")
            if cid == b"data":
                body = raw[i + 8:i + 8 + size]
                x = (np.frombuffer(body, "<i2").astype(np.float32) / 32768) if fmt == 1 else np.frombuffer(body, "<f4")
                out.append(x.astype(np.float32))
                break
            i += 8 + size + (size & 1)
    if not out:
        raise SystemExit(f"no .wav recordings in {data}")
    return np.concatenate(out)


def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")
