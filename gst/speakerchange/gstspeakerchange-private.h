// The element's instance struct and debug category, shared by its source files (settings,
// engine, stream, and the GObject/GstBaseTransform glue in gstspeakerchange.cpp).
#pragma once

#include <gst/audio/gstaudiofilter.h>
#include <gst/gst.h>

#include "gstspeakerchange-settings.h"
#include "gstspeakerchange-stall.h"
#include "gstspeakerchange-stream.h"
#include "gstspeakerchange.h"

GST_DEBUG_CATEGORY_EXTERN(gst_speaker_change_debug);
#define GST_CAT_DEFAULT gst_speaker_change_debug

struct _GstSpeakerChange {
  GstAudioFilter parent;
  gstspeakerchange::Settings* settings;  // under the object lock
  gstspeakerchange::Stream* stream;      // under the stream lock
  gstspeakerchange::StallTimer* stall;   // under its own mutex
};
