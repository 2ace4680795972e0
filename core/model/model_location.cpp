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

}  // namespace

std::string build_model_path() {
  return SPEAKERSEG_BUILD_MODEL;
}

std::string installed_model_path() {
  return SPEAKERSEG_INSTALLED_MODEL;
}

std::string default_model_path() {
  const char* env = std::getenv(kModelEnvironmentVariable);
  if (env && *env) return env;
  for (const std::string& path : {build_model_path(), installed_model_path()})
    if (exists(path, false)) return path;
  return exists(folder_of(build_model_path()), true) ? build_model_path() : installed_model_path();
}

}  // namespace speakerseg
