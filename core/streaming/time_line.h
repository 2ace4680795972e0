// Where upstream's audio lands in time, and how announcements are stamped so that applications
// can trust their order. Upstream's timestamps are not always a clock: a live source that froze
// and resumes may send what it owes at once, stamped with the time it arrives (the same few
// milliseconds for seconds of audio); a restarted source may begin again at 0; jitter and clock
// drift move every buffer a little. Audio is the evidence and the sample count its clock, as in
// audiobasesink: small disagreements are jitter, short forward gaps are lost audio (silence),
// long ones end the stretch; timestamps that fall behind the samples are believed only once they
// stay behind for `discont_wait` of audio. Then the audio that repeats time already analysed is
// dropped until they catch up, unless they went back for good by more than `max_skipped` (they
// keep pace with the audio, further back): then a new stretch begins there, as it does at once
// for a buffer upstream flagged as a discontinuity.
//
// A time line is what announcements are ordered on: each one's time is no earlier than the one
// before it on the same line. A stretch that begins before the end of the audio the line already
// carried (timestamps that went back for good, a flush) begins a new line, and its first
// announcement says why. Plain arithmetic in nanoseconds of upstream's buffer time.
#pragma once

#include <cstdint>
#include <string>

namespace speakerseg {

// What to do with a buffer whose first sample upstream stamped with a time.
struct Placement {
  enum class Action {
    kAppend,      // continues the stretch: `silence` samples of silence first, then the buffer
                  // less its first `skip` samples
    kNewStretch,  // the stretch ends here; the buffer begins the next one at its own time
  };
  Action action = Action::kAppend;
  int64_t silence = 0;
  int64_t skip = 0;
  // For kNewStretch and for the first skip of an episode: what upstream's timestamps did.
  std::string why;
};

class TimeLine {
 public:
  struct Options {
    int64_t alignment = 40'000'000;        // ns of disagreement taken as jitter
    int64_t max_filled = 1'000'000'000;    // forward gaps shorter than this become silence
    int64_t discont_wait = 1'000'000'000;  // how long timestamps must stay behind (audio ns)
    int64_t max_skipped = 1'000'000'000;   // shifted back by more: a new stretch
  };

  TimeLine() : TimeLine(Options{}) {}
  explicit TimeLine(Options options) : options_(options) {}

  bool in_stretch() const { return in_stretch_; }
  // The stretch's sample 0 is at `start`. Before the end of the audio this line carried: a new
  // line, because upstream's timestamps went back (after what the last end_stretch() said).
  void begin_stretch(int64_t start);
  // The stretch ended (EOS, a long gap, a stall): the line goes on. `after` ("after the feed
  // stalled"), if given, says in the next line's reason what came before it.
  void end_stretch(const std::string& after = "") {
    in_stretch_ = false;
    after_ = after;
  }
  // Everything before is forgotten (a flush): the next stretch begins a new line for `why`.
  void restart(const std::string& why);

  // A buffer of `n` samples stamped `pts`, `total` samples into the stretch. `discont`: upstream
  // flagged it as not following the previous one, so its time is believed at once, also behind.
  Placement place(int64_t pts, int64_t total, int64_t n, bool discont = false);
  // Buffer time of the stretch's sample `sample`.
  int64_t time_of(int64_t sample) const;
  // The stretch's audio reaches `sample`: the line has carried audio up to time_of(sample).
  void reached(int64_t sample);

  struct Stamp {
    int64_t time = 0;      // never earlier than the previous stamp on this line
    uint32_t line = 0;     // 0, 1, ...: which time line
    std::string new_line;  // on the first stamp of a new line: why it began; "" otherwise
  };
  Stamp stamp(int64_t time);
  uint32_t line() const { return line_; }

 private:
  Options options_;
  bool in_stretch_ = false;
  int64_t base_ = 0;        // buffer time of the stretch's sample 0
  bool line_used_ = false;  // the line carried audio: `line_end_` means something
  int64_t line_end_ = 0;    // the end of the audio this line carried
  bool stamped_ = false;
  int64_t last_stamp_ = 0;
  uint32_t line_ = 0;
  std::string new_line_;  // why the current line began, until its first stamp
  std::string restart_;   // a flush's reason, for the next stretch
  std::string after_;     // how the last stretch ended, for the next one's reason
  // The stretch sample from which the timestamps stayed behind (-1: they do not), and how far
  // behind they were then (ns).
  int64_t behind_since_ = -1;
  int64_t behind_first_ = 0;
  bool skipping_ = false;  // behind for discont_wait: dropping what repeats time
};

}  // namespace speakerseg
