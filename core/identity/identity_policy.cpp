#include "identity/identity_policy.h"

#include <algorithm>
#include <cmath>

namespace speakerseg {
namespace {

constexpr double kShortEvidence = 1.6, kLongEvidence = 6.0, kNewAfter = 3.0;

// The best candidate that `allowed` admits (id -1: none).
template <typename Allowed>
Match best_where(const std::vector<Match>& candidates, Allowed allowed) {
  Match top;
  for (const Match& m : candidates)
    if (allowed(m) && (top.id < 0 || m.score > top.score)) top = m;
  return top;
}

}  // namespace

double IdentityPolicy::keep_floor(double seconds) const {
  if (seconds <= kShortEvidence) return s_.keep_floor_short;
  if (seconds >= kLongEvidence) return s_.keep_floor_long;
  const double t = std::log(seconds / kShortEvidence) / std::log(kLongEvidence / kShortEvidence);
  return s_.keep_floor_short + t * (s_.keep_floor_long - s_.keep_floor_short);
}

Match IdentityPolicy::best(const std::vector<Match>& candidates, int except) {
  return best_where(candidates, [&](const Match& m) { return m.id != except; });
}

void IdentityPolicy::calibrate(std::vector<Match>& candidates, bool narrowband) const {
  for (Match& m : candidates) m.score = calibrated(m.score, narrowband && m.narrowband);
}

Decision IdentityPolicy::decide(int present, double seconds, std::vector<Match> candidates,
                                bool may_add, bool narrowband, bool guarded, bool self_made) const {
  calibrate(candidates, narrowband);
  const auto own = std::find_if(candidates.begin(), candidates.end(),
                                [&](const Match& m) { return m.id == present; });
  const bool voiced = own != candidates.end();  // the present voice has a voiceprint
  if (seconds <= 0) {
    // Nothing heard clean yet: continuity is all there is.
    if (present >= 0) return {Verdict::kKeep, present, voiced ? own->score : 0.f};
    return {Verdict::kUnknown, -1, 0.f};
  }
  if (voiced && self_made) {
    // The present voice is this evidence: its score says nothing about who speaks. The turn is
    // an enrolled person when its grown evidence matches them as a first decision would (ahead
    // of every other voice but its own by the margin), else its own. Not an anonymous voice: in
    // a meeting room, a few seconds of the stream match other people's grown evidence too.
    const Match top =
        best_where(candidates, [&](const Match& m) { return m.id != present && m.enrolled; });
    const Match runner_up =
        best_where(candidates, [&](const Match& m) { return m.id != present && m.id != top.id; });
    if (top.id >= 0 && top.score >= threshold(top) &&
        (runner_up.id < 0 || top.score >= runner_up.score + s_.margin))
      return {Verdict::kKnown, top.id, top.score};
    return {Verdict::kKeep, present, own->score};
  }
  const Match top = best(candidates);
  const Match runner_up = best(candidates, top.id);
  // Ahead of every other voice by the margin.
  const bool clear = runner_up.id < 0 || top.score >= runner_up.score + s_.margin;
  if (top.id >= 0 && top.id != present) {
    // Below the threshold an enrolled voice still takes the turn when the turn's present voice
    // is far behind it: a label carried onto an enrolled person scores its own voice like a
    // stranger. Not an anonymous voice: a few seconds of the stream make a less certain one.
    const bool far_ahead =
        top.enrolled && voiced && top.score >= s_.lead_floor && top.score >= own->score + s_.lead;
    if ((top.score >= threshold(top) || far_ahead) && clear)
      return {Verdict::kKnown, top.id, top.score};
  }
  // A voiceprint of a few seconds scores even its own person's long evidence low: the floor goes
  // with the shorter of the two.
  // An enrolled name stays only while it is the best match: a label carried onto somebody else
  // scores an enrolment about as low as any stranger's voice does.
  const bool outscored = voiced && own->enrolled && top.id != present;
  if (voiced && !outscored && own->score >= keep_floor(std::min(seconds, own->seconds)))
    return {Verdict::kKeep, present, own->score};
  // A guarded turn (its label speaks again after others spoke, as in conversation) goes to
  // somebody new only on kNewAfter of evidence: short stretches of speech in a noisy room score
  // their own person low now and then. It may go to somebody known sooner.
  if (voiced && !outscored && guarded && seconds < kNewAfter &&
      (top.id == present || top.score < threshold(top)))
    return {Verdict::kKeep, present, own->score};
  if (top.id >= 0 && top.score >= threshold(top)) {
    // Two known voices match with no clear winner: the turn is one of them, not a new person;
    // its own voice when that is one of them.
    if (voiced && own->score >= top.score - s_.margin) return {Verdict::kKeep, present, own->score};
    // A turn with no voice of its own yet is not shown under one enrolled person's name while
    // its evidence is short (under kNewAfter, as for a guarded turn: short stretches score people
    // unevenly) and scores another enrolled person as well (within the margin): two enrolments
    // are like evidence, and a wrong name on screen is worse than none. It is shown as not yet
    // known (a voice without voiceprint, `present` if it has one) until its evidence is longer,
    // and the decision then revises what was shown. Against an anonymous voice the closer stays
    // the answer: a voice learned from the stream scores the stream's speech high whoever speaks
    // (often it is the enrolled person's own twin), and a label is not a name.
    if (!voiced && top.enrolled && runner_up.enrolled && may_add && seconds < kNewAfter && !clear)
      return present >= 0 ? Decision{Verdict::kKeep, present, 0.f}
                          : Decision{Verdict::kUnknown, -1, 0.f};
    return {Verdict::kKnown, top.id, top.score};
  }
  if (!may_add) {
    if (top.id >= 0)
      return {top.id == present ? Verdict::kKeep : Verdict::kKnown, top.id, top.score};
    if (present >= 0) return {Verdict::kKeep, present, 0.f};
  }
  return {Verdict::kNew, -1, 0.f};
}

int IdentityPolicy::enrolled_match(std::vector<Match> enrolled, double seconds,
                                   bool narrowband) const {
  if (seconds < kLongEvidence) return -1;
  calibrate(enrolled, narrowband);
  const Match top = best(enrolled);
  const Match runner_up = best(enrolled, top.id);
  if (top.id < 0 || top.score < s_.enrolled_merge_threshold) return -1;
  return runner_up.id < 0 || top.score >= runner_up.score + s_.margin ? top.id : -1;
}

bool IdentityPolicy::learns(int voice, double seconds, std::vector<Match> candidates,
                            bool narrowband) const {
  calibrate(candidates, narrowband);
  const auto own = std::find_if(candidates.begin(), candidates.end(),
                                [&](const Match& m) { return m.id == voice; });
  if (own == candidates.end()) return false;
  const float score = own->score;
  // A young voiceprint (a first turn's few seconds) scores its own person low: it learns from
  // the turns it kept, until it has kLongEvidence behind it; then only from clear matches.
  const double bar = own->seconds < kLongEvidence
                         ? std::min(s_.match_threshold, keep_floor(std::min(seconds, own->seconds)))
                         : s_.match_threshold;
  if (score < bar) return false;
  const Match other = best(candidates, voice);
  return other.id < 0 || score >= other.score + s_.margin;
}

}  // namespace speakerseg
