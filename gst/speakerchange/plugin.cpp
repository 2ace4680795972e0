// SPDX-License-Identifier: MIT
//
// The speakerchange plugin: one element, speakerchange (see gstspeakerchange.cpp).
#include <gst/gst.h>

#include "gstspeakerchange.h"

#if !defined(PACKAGE) || !defined(PACKAGE_VERSION) || !defined(GST_PACKAGE_NAME) || \
    !defined(GST_PACKAGE_ORIGIN)
#error "gst/speakerchange/meson.build defines these"
#endif

static gboolean plugin_init(GstPlugin* plugin) {
  return GST_ELEMENT_REGISTER(speakerchange, plugin);
}

// GStreamer spells the MIT licence "MIT/X11"; plain "MIT" loads but logs "unknown license".
GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, speakerchange,
                  "Speaker change detection with pyannote segmentation-3.0", plugin_init,
                  PACKAGE_VERSION, "MIT/X11", GST_PACKAGE_NAME, GST_PACKAGE_ORIGIN)
