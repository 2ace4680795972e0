#include "streaming/stream_settings.h"

#include <sstream>
#include <stdexcept>

namespace speakerseg {

void check_range(const SettingRange& range, double value) {
  if (value >= range.min && value <= range.max) return;  // NaN fails both
  std::ostringstream msg;
  msg << range.name << " must be from " << range.min << " to " << range.max << range.unit
      << ", got " << value;
  throw std::invalid_argument(msg.str());
}

double voice_threshold(const StreamSettings& s) {
  return s.identity.match_threshold > 0 ? s.identity.match_threshold : kVoiceThreshold;
}

double enrolled_threshold(const StreamSettings& s) {
  return s.identity.enrolled_threshold > 0 ? s.identity.enrolled_threshold : kEnrolledThreshold;
}

double enrolled_merge_threshold(const StreamSettings& s) {
  if (s.identity.enrolled_merge_threshold > 0) return s.identity.enrolled_merge_threshold;
  return enrolled_threshold(s) + s.identity.merge_threshold - voice_threshold(s);
}

void validate_settings(const StreamSettings& s, bool offline) {
  check_range(kStepRange, s.step);
  if (!offline) check_range(kLatencyRange, s.latency);
  check_range(kMinSpeechRange, s.min_speech);
  check_range(kMinSilenceRange, s.min_silence);
  check_range(kVoiceThresholdRange, s.identity.match_threshold);
  check_range(kEnrolledThresholdRange, s.identity.enrolled_threshold);
  check_range(kEnrolledMergeThresholdRange, s.identity.enrolled_merge_threshold);
  check_range(kMaxSpeakersRange, s.identity.max_speakers);
}

}  // namespace speakerseg
