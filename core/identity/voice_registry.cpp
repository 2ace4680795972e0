#include "identity/voice_registry.h"

#include <algorithm>
#include <cmath>

#include "identity/squared_norm.h"

namespace speakerseg {
namespace {

float dot_normalised(const std::vector<float>& sum, const std::vector<float>& e) {
  double dot = 0;
  for (size_t k = 0; k < sum.size() && k < e.size(); ++k) dot += static_cast<double>(sum[k]) * e[k];
  const double norm = squared_norm(sum);
  return norm > 0 ? static_cast<float>(dot / std::sqrt(norm)) : 0.f;
}

}  // namespace

int VoiceRegistry::enroll(const std::string& name, const std::vector<float>& embedding,
                          bool narrowband) {
  Voice v;
  v.id = static_cast<int>(names_.size());
  v.name = name;
  v.enrolled = true;
  v.sum = embedding;
  v.weight = 1;
  v.narrow = narrowband ? 1 : 0;
  names_.push_back(name);
  voices_.push_back(std::move(v));
  return voices_.back().id;
}

int VoiceRegistry::add(const std::vector<float>& embedding, double seconds, int64_t now) {
  make_room();
  Voice v;
  v.id = static_cast<int>(names_.size());
  v.name = "speaker-" + std::to_string(anonymous_++);
  v.last_heard = v.first_heard = now;
  names_.push_back(v.name);
  voices_.push_back(std::move(v));
  if (!embedding.empty()) learn(voices_.back().id, embedding, seconds, now);
  return voices_.back().id;
}

void VoiceRegistry::learn(int id, const std::vector<float>& embedding, double seconds, int64_t now,
                          bool narrowband) {
  Voice* v = get(id);
  if (!v) return;
  v->last_heard = std::max(v->last_heard, now);
  if (v->enrolled) return;
  if (v->sum.empty()) v->sum.assign(embedding.size(), 0.f);
  for (size_t k = 0; k < embedding.size(); ++k)
    v->sum[k] += static_cast<float>(seconds) * embedding[k];
  v->weight += seconds;
  if (narrowband) v->narrow += seconds;
}

void VoiceRegistry::heard(int id, int64_t now) {
  if (Voice* v = get(id)) v->last_heard = std::max(v->last_heard, now);
}

void VoiceRegistry::named(int id, int64_t now) {
  if (Voice* v = get(id)) v->last_named = std::max(v->last_named, now);
}

std::vector<Match> VoiceRegistry::scores(const std::vector<float>& embedding,
                                         const std::function<bool(int)>& allowed) const {
  std::vector<Match> out;
  for (const Voice& v : voices_)
    if (v.has_voiceprint() && allowed(v.id))
      out.push_back({v.id, dot_normalised(v.sum, embedding), v.enrolled, v.narrowband(),
                     v.enrolled ? kEnrolledSeconds : v.weight});
  return out;
}

float VoiceRegistry::similarity(int a, int b) const {
  const Voice* va = find(a);
  const Voice* vb = find(b);
  if (!va || !vb || !va->has_voiceprint() || !vb->has_voiceprint()) return 0.f;
  const double norm = squared_norm(va->sum);
  return norm > 0 ? static_cast<float>(dot_normalised(vb->sum, va->sum) / std::sqrt(norm)) : 0.f;
}

float VoiceRegistry::score(int id, const std::vector<float>& embedding) const {
  const Voice* v = find(id);
  return v && v->has_voiceprint() ? dot_normalised(v->sum, embedding) : 0.f;
}

const Voice* VoiceRegistry::find(int id) const {
  for (const Voice& v : voices_)
    if (v.id == id) return &v;
  return nullptr;
}

Voice* VoiceRegistry::get(int id) {
  return const_cast<Voice*>(find(id));
}

void VoiceRegistry::forget(int id) {
  voices_.erase(std::remove_if(voices_.begin(), voices_.end(),
                               [id](const Voice& v) { return v.id == id && !v.enrolled; }),
                voices_.end());
}

void VoiceRegistry::make_room() {
  while (voices_.size() >= capacity_) {
    auto oldest = voices_.end();
    for (auto it = voices_.begin(); it != voices_.end(); ++it)
      if (!it->enrolled && (oldest == voices_.end() || it->last_heard < oldest->last_heard))
        oldest = it;
    if (oldest == voices_.end()) return;  // only enrolled people: they stay
    voices_.erase(oldest);
  }
}

void VoiceRegistry::reset() {
  voices_.erase(
      std::remove_if(voices_.begin(), voices_.end(), [](const Voice& v) { return !v.enrolled; }),
      voices_.end());
  // Enrolled voices keep their ids; anonymous numbering starts again with the new time line, in
  // which nobody has been named yet.
  for (Voice& v : voices_) v.last_named = -1;
  names_.resize(voices_.empty() ? 0 : static_cast<size_t>(voices_.back().id) + 1);
  anonymous_ = 0;
}

}  // namespace speakerseg
