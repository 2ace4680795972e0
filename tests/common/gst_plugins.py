"""Only the GStreamer plugins a test uses: a fresh registry of this build's plugin and the named
system plugins, whatever else is installed. A full scan loads every installed plugin into the
test's process (with GST_REGISTRY_FORK=no, which the sanitised builds need), and some of them
(gstreamer1.0-plugins-bad's openni2 drivers, fontconfig under pango) leak or register enough
quarks for LeakSanitizer to report them as our leaks.

  import gst_plugins; gst_plugins.use_only("coreelements", "playback", ...)

The system plugin folder comes from SPEAKERCHANGE_SYSTEM_PLUGINS (tests/meson.build: gstreamer's
pluginsdir); GST_PLUGIN_PATH (this build's plugin) is left as the test sets it.
"""
import atexit
import os
import pathlib
import shutil
import sys
import tempfile

# Where Debian keeps each plugin a test may ask for, for the error message.
PACKAGE = {"coreelements": "libgstreamer1.0-0", "vpx": "gstreamer1.0-plugins-good",
           "matroska": "gstreamer1.0-plugins-good", "wavparse": "gstreamer1.0-plugins-good",
           "rtsp": "gstreamer1.0-plugins-good", "rtp": "gstreamer1.0-plugins-good",
           "rtpmanager": "gstreamer1.0-plugins-good", "udp": "gstreamer1.0-plugins-good"}


def use_only(*names):
    """Points this process and its children at a registry holding only `names` (and this build's
    plugin on GST_PLUGIN_PATH). Exits with a clear message when one is not installed."""
    system = pathlib.Path(os.environ["SPEAKERCHANGE_SYSTEM_PLUGINS"])
    folder = pathlib.Path(tempfile.mkdtemp(prefix="speakerchange-plugins-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / "plugins").mkdir()
    for name in names:
        plugin = system / f"libgst{name}.so"
        if not plugin.is_file():
            sys.exit(f"FAIL: the GStreamer plugin '{name}' is not in {system}: install "
                     f"{PACKAGE.get(name, 'gstreamer1.0-plugins-base')} (scripts/setup.sh does)")
        (folder / "plugins" / plugin.name).symlink_to(plugin)
    os.environ["GST_PLUGIN_SYSTEM_PATH_1_0"] = str(folder / "plugins")
    os.environ["GST_REGISTRY_1_0"] = str(folder / "registry.bin")
