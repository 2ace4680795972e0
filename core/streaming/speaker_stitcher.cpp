#include "streaming/speaker_stitcher.h"

#include <algorithm>
#include <cmath>

#include "model/model_spec.h"

namespace speakerseg {
namespace {
constexpr int kFrameStepSamples = 270;
constexpr int kFrameCentreSamples = 495;  // half the 991-sample receptive field
constexpr int kMaxCandidates = 6;         // stream speakers considered per window
}  // namespace

SpeakerStitcher::SpeakerStitcher(double match_threshold, double onset)
    : match_threshold_(match_threshold), onset_(onset) {}

int64_t SpeakerStitcher::frame_of_window_start(int64_t start_sample) {
  return static_cast<int64_t>(std::llround(static_cast<double>(start_sample) / kFrameStepSamples));
}

int64_t SpeakerStitcher::frame_centre_sample(int64_t frame) {
  return frame * kFrameStepSamples + kFrameCentreSamples;
}

void SpeakerStitcher::reset() {
  labels_.clear();
  frames_.clear();
  first_frame_ = finalized_end_ = 0;
}

float& SpeakerStitcher::Frame::at(int speaker) {
  auto it = std::lower_bound(sum.begin(), sum.end(), speaker,
                             [](const std::pair<int, float>& e, int g) { return e.first < g; });
  if (it == sum.end() || it->first != speaker) it = sum.insert(it, {speaker, 0.f});
  return it->second;
}

std::vector<int> SpeakerStitcher::match(int64_t k0, const float* activity, int frames) const {
  // The frames this window shares with the timeline, and the total mean activity on them of every
  // stream speaker they hold.
  const int64_t lo = std::max<int64_t>({k0, first_frame_, 0});
  const int64_t hi = std::min<int64_t>(k0 + frames, covered_end());
  std::vector<const Frame*> shared;
  std::vector<int> rows;
  std::vector<std::pair<int, double>> totals;  // (label, total), few entries
  for (int64_t k = lo; k < hi; ++k) {
    const Frame& f = frames_[static_cast<size_t>(k - first_frame_)];
    if (f.weight <= 0) continue;
    shared.push_back(&f);
    rows.push_back(static_cast<int>(k - k0));
    for (const auto& [g, v] : f.sum) {
      auto it = std::find_if(totals.begin(), totals.end(),
                             [g = g](const auto& t) { return t.first == g; });
      if (it == totals.end()) it = totals.insert(totals.end(), {g, 0.0});
      it->second += v / f.weight;
    }
  }
  // Candidates: the stream speakers most active on the shared frames.
  std::vector<std::pair<double, int>> total;
  for (const auto& [g, t] : totals)
    if (t > 0.5) total.emplace_back(t, g);
  std::sort(total.rbegin(), total.rend());
  if (total.size() > kMaxCandidates) total.resize(kMaxCandidates);
  const int nc = static_cast<int>(total.size());
  std::vector<std::vector<float>> mean(nc, std::vector<float>(rows.size(), 0.f));
  for (int c = 0; c < nc; ++c)
    for (size_t r = 0; r < rows.size(); ++r)
      mean[c][r] = value_of(shared[r]->sum, total[c].second) / shared[r]->weight;

  // Soft Jaccard similarity between window speaker j and candidate c on the shared frames.
  double sim[kLocalSpeakers][kMaxCandidates] = {};
  for (int j = 0; j < kLocalSpeakers; ++j)
    for (int c = 0; c < nc; ++c) {
      const auto& m = mean[c];
      double inter = 0, uni = 0;
      for (size_t r = 0; r < rows.size(); ++r) {
        const double a = activity[rows[r] * kLocalSpeakers + j], b = m[r];
        inter += std::min(a, b);
        uni += std::max(a, b);
      }
      sim[j][c] = uni > 1e-6 ? inter / uni : 0;
    }

  // Exhaustive search: three window speakers, each to a distinct candidate or to none.
  std::vector<int> best(kLocalSpeakers, -1), cur(kLocalSpeakers, -1);
  double best_score = -1;
  auto search = [&](auto&& self, int j, unsigned used, double score) -> void {
    if (j == kLocalSpeakers) {
      if (score > best_score) {
        best_score = score;
        best = cur;
      }
      return;
    }
    cur[j] = -1;
    self(self, j + 1, used, score);
    for (int c = 0; c < nc; ++c)
      if (!(used & (1u << c)) && sim[j][c] >= match_threshold_) {
        cur[j] = total[c].second;
        self(self, j + 1, used | (1u << c), score + sim[j][c]);
      }
    cur[j] = -1;
  };
  search(search, 0, 0u, 0.0);
  return best;
}

void SpeakerStitcher::add_window(int64_t start_sample, const float* activity, int frames) {
  if (taper_.size() != static_cast<size_t>(frames)) {
    // Frames near a window's edges saw less context; a Hamming taper lets the windows that saw
    // them in the middle decide.
    taper_.resize(frames);
    for (int i = 0; i < frames; ++i)
      taper_[i] = frames > 1
                      ? static_cast<float>(0.54 - 0.46 * std::cos(2 * M_PI * i / (frames - 1)))
                      : 1.f;
  }
  const int64_t k0 = frame_of_window_start(start_sample);
  // Drop history no window will share again, once it has been returned.
  while (!frames_.empty() && first_frame_ < std::min(k0, finalized_end_)) {
    frames_.pop_front();
    ++first_frame_;
  }
  if (frames_.empty()) first_frame_ = std::max<int64_t>({k0, finalized_end_, 0});

  std::vector<int> map = match(k0, activity, frames);
  for (int j = 0; j < kLocalSpeakers; ++j) {
    if (map[j] >= 0) continue;
    float peak = 0;
    for (int i = 0; i < frames; ++i)
      if (k0 + i >= 0) peak = std::max(peak, activity[i * kLocalSpeakers + j]);
    if (peak >= onset_) {
      map[j] = static_cast<int>(labels_.size());
      labels_.push_back("speaker-" + std::to_string(labels_.size()));
    }
  }

  const int64_t end = k0 + frames;
  while (covered_end() < end) frames_.emplace_back();
  for (int i = 0; i < frames; ++i) {
    const int64_t k = k0 + i;
    if (k < first_frame_) continue;  // left padding, or frames already returned
    Frame& f = frames_[static_cast<size_t>(k - first_frame_)];
    f.weight += taper_[i];
    for (int j = 0; j < kLocalSpeakers; ++j)
      if (map[j] >= 0) f.at(map[j]) += taper_[i] * activity[i * kLocalSpeakers + j];
  }
}

FrameActivity SpeakerStitcher::frame_activity(int64_t k) const {
  const Frame& f = frames_[static_cast<size_t>(k - first_frame_)];
  FrameActivity fa;
  fa.frame = k;
  fa.activity.reserve(f.sum.size());
  for (const auto& [g, sum] : f.sum)
    fa.activity.emplace_back(g, f.weight > 0 ? sum / f.weight : 0.f);
  return fa;
}

void SpeakerStitcher::finalize_before(int64_t end_frame, std::vector<FrameActivity>& out) {
  end_frame = std::min(end_frame, covered_end());
  for (int64_t k = std::max(finalized_end_, first_frame_); k < end_frame; ++k)
    out.push_back(frame_activity(k));
  finalized_end_ = std::max(finalized_end_, end_frame);
}

void SpeakerStitcher::peek_from(int64_t from, std::vector<FrameActivity>& out) const {
  for (int64_t k = std::max(from, first_frame_); k < covered_end(); ++k)
    out.push_back(frame_activity(k));
}

}  // namespace speakerseg
