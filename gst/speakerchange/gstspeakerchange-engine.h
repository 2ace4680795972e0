// The inference engine an element starts with: its own, or the process-wide shared one
// (EnginePool), of the kind the settings ask for (CPU or CUDA, with auto's fallback). Errors are
// posted on the element, so that READY to PAUSED fails saying what is wrong and how to fix it.
#pragma once

#include "gstspeakerchange-settings.h"
#include "gstspeakerchange-stream.h"
#include "gstspeakerchange.h"

namespace gstspeakerchange {

// Loads the model and sets s->engine (own engine) or s->scheduler (shared engine). False, with an
// error posted, when that fails.
bool acquire_engine(GstSpeakerChange* self, const Settings& p, Stream* s);

}  // namespace gstspeakerchange
