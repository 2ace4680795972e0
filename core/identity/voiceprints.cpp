#include "identity/voiceprints.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "identity/squared_norm.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

constexpr const char* kFormat = "speakerchange-voiceprints";
constexpr int kVersion = 1;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw VoiceprintsError("voiceprints file '" + path + "': " + what +
                         ". Make or extend it with `speakerseg enroll --name NAME --input "
                         "clip.wav --voiceprints FILE`");
}

}  // namespace

std::shared_ptr<const Voiceprints> Voiceprints::load(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    fail(path, std::string("cannot be opened (") + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) fail(path, "is not a regular file");
  std::ifstream in(path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("is not valid JSON (") + e.what() + ")");
  }
  auto out = std::make_shared<Voiceprints>();
  try {
    if (!j.is_object() || j.value("format", "") != kFormat)
      fail(path, std::string("is not a voiceprints file (no \"format\": \"") + kFormat + "\")");
    if (j.value("version", 0) != kVersion)
      fail(path, "has version " + j.value("version", nlohmann::json()).dump() +
                     ", this build reads version " + std::to_string(kVersion));
    const std::string encoder = j.value("encoder", "");
    if (encoder != kVoiceEncoderName)
      fail(path, "was made with encoder '" + encoder + "', this build uses '" + kVoiceEncoderName +
                     "' (enrol the speakers again)");
    if (j.value("dimension", 0) != kEmbeddingDim)
      fail(path, "has dimension " + j.value("dimension", nlohmann::json()).dump() + ", expected " +
                     std::to_string(kEmbeddingDim));
    if (!j.contains("speakers") || !j["speakers"].is_array())
      fail(path, "has no \"speakers\" list");
    std::set<std::string> names;
    for (const auto& s : j["speakers"]) {
      Voiceprint p;
      p.name = s.at("name").get<std::string>();
      if (p.name.empty()) fail(path, "has a speaker without a name");
      if (!names.insert(p.name).second) fail(path, "names '" + p.name + "' twice");
      p.seconds = s.value("seconds", 0.0);
      p.narrowband = s.value("narrowband", 0.0);
      if (!(p.seconds >= 0))
        fail(path, "speaker '" + p.name + "' has a negative or non-numeric \"seconds\"");
      if (!(p.narrowband >= 0 && p.narrowband <= p.seconds))
        fail(path, "speaker '" + p.name + "' has \"narrowband\" outside 0 .. its \"seconds\"");
      p.embedding = s.at("embedding").get<std::vector<float>>();
      if (p.embedding.size() != static_cast<size_t>(kEmbeddingDim))
        fail(path, "speaker '" + p.name + "' has " + std::to_string(p.embedding.size()) +
                       " values, expected " + std::to_string(kEmbeddingDim));
      for (float v : p.embedding)
        if (!std::isfinite(v)) fail(path, "speaker '" + p.name + "' has a non-finite value");
      const double norm = squared_norm(p.embedding);
      if (std::fabs(std::sqrt(norm) - 1) > 1e-3)
        fail(path, "speaker '" + p.name + "' has no unit-length embedding (length " +
                       std::to_string(std::sqrt(norm)) + ")");
      out->speakers.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("is malformed (") + e.what() + ")");
  }
  return out;
}

void Voiceprints::save(const std::string& path) const {
  // One line per speaker, so that the file reads (and diffs) as a list of people.
  std::string text = "{\"format\": \"" + std::string(kFormat) +
                     "\", \"version\": " + std::to_string(kVersion) + ", \"encoder\": \"" +
                     kVoiceEncoderName + "\", \"dimension\": " + std::to_string(kEmbeddingDim) +
                     ",\n \"speakers\": [";
  for (size_t i = 0; i < speakers.size(); ++i) {
    const auto& p = speakers[i];
    // Written key by key in this order (nlohmann::json sorts keys; ordered_json would double
    // this file's template instantiations, the longest compile of the sanitizer build).
    text += std::string(i ? ",\n  " : "\n  ") + "{\"name\":" + nlohmann::json(p.name).dump() +
            ",\"seconds\":" + nlohmann::json(p.seconds).dump() +
            ",\"narrowband\":" + nlohmann::json(p.narrowband).dump() +
            ",\"embedding\":" + nlohmann::json(p.embedding).dump() + "}";
  }
  text += "\n]}\n";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw VoiceprintsError("cannot write voiceprints file '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw VoiceprintsError("cannot replace voiceprints file '" + path + "' (" +
                           std::strerror(errno) + ")");
}

void Voiceprints::enroll(const std::string& name, const std::vector<float>& embedding,
                         double seconds, bool narrowband) {
  const double narrow = narrowband ? seconds : 0;
  for (auto& p : speakers) {
    if (p.name != name) continue;
    const double total = p.seconds + seconds;
    for (size_t k = 0; k < p.embedding.size(); ++k)
      p.embedding[k] = static_cast<float>((p.seconds * p.embedding[k] + seconds * embedding[k]) /
                                          std::max(total, 1e-9));
    const double norm = squared_norm(p.embedding);
    for (float& v : p.embedding) v = static_cast<float>(v / std::sqrt(std::max(norm, 1e-30)));
    p.seconds = total;
    p.narrowband += narrow;
    return;
  }
  speakers.push_back({name, seconds, narrow, embedding});
}

}  // namespace speakerseg
