#include "model/model_location.h"

#include <sys/stat.h>

#include <cstdlib>

namespace speakerseg {
namespace {

bool exists(const std::string& path, bool directory) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The environment's path when set and not empty; else the first of `build` and `installed` that
// exists; else the one a "cannot be opened" message should name.
std::string pick(const char* variable, const std::string& build, const std::string& installed) {
  const char* env = std::getenv(variable);
  if (env && *env) return env;
  for (const std::string& path : {build, installed})
    if (exists(path, false)) return path;
  return exists(folder_of(build), true) ? build : installed;
}

}  // namespace

std::string build_model_path() {
  return SPEAKERSEG_BUILD_MODEL;
}

std::string installed_model_path() {
  return SPEAKERSEG_INSTALLED_MODEL;
}

std::string default_model_path() {
  return pick(kModelEnvironmentVariable, build_model_path(), installed_model_path());
}

std::string build_voice_model_path() {
  return SPEAKERSEG_BUILD_VOICE_MODEL;
}

std::string installed_voice_model_path() {
  return SPEAKERSEG_INSTALLED_VOICE_MODEL;
}

std::string default_voice_model_path() {
  return pick(kVoiceModelEnvironmentVariable, build_voice_model_path(),
              installed_voice_model_path());
}

}  // namespace speakerseg
