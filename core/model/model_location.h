// Where the model file is when nobody names one. The build tree's copy serves an uninstalled
// build; `meson install` copies it (and its licence) to <datadir>/speakerchange, where an
// installed plugin finds it after the source tree is gone.
#pragma once

#include <string>

namespace speakerseg {

// The environment variable that overrides both.
constexpr const char* kModelEnvironmentVariable = "SPEAKERCHANGE_MODEL";

// $SPEAKERCHANGE_MODEL when set and not empty; else the first that exists of the build-time path
// (meson's -Dmodel, by default <source>/models/segmentation-3.0.onnx) and the installed copy;
// else the one a "cannot be opened" message should name: the build-time path where its folder
// still exists (a checkout that has not fetched the model yet), the installed one otherwise.
std::string default_model_path();

// The two candidates, for messages and --help.
std::string build_model_path();
std::string installed_model_path();

// The same for the voice encoder (models/voice-encoder-ge2e.onnx, made by
// scripts/models/fetch_voice_model.sh), overridden by $SPEAKERCHANGE_VOICE_MODEL.
constexpr const char* kVoiceModelEnvironmentVariable = "SPEAKERCHANGE_VOICE_MODEL";
std::string default_voice_model_path();
std::string build_voice_model_path();
std::string installed_voice_model_path();

}  // namespace speakerseg
