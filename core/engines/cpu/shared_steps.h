// The steps of one recurrence shared by a team of threads, each step cut into parts (blocks of
// hidden units). Part p of every step is thread p's, so that its share of the weights stays in
// that core's cache; a step begins when every part of the step before it is done, since each
// needs all of h(t-1).
//
// A step takes microseconds, so waiting for it spins: a futex sleep and wake-up would cost as much.
// But a machine with more runnable threads than cores (one pipeline process per channel, say)
// deschedules a thread for a whole scheduler slice, milliseconds, and a plain barrier would make
// its peers wait that long at every step (seen: 10x slower than one thread). So a thread whose
// peers are late takes over their unclaimed parts of the step instead; when the owner runs again
// it finds them taken and carries on from the step the team has reached. Each part of each step is
// claimed exactly once, so the numbers are the same whoever computes it.
#pragma once

#include <atomic>
#include <thread>

namespace speakerseg::cpu {

class SharedSteps {
 public:
  static constexpr int kMaxParts = 64;

  explicit SharedSteps(int steps) : steps_(steps) {
    for (std::atomic<int>& c : claimed_) c.store(-1, std::memory_order_relaxed);
  }

  // Thread `me` of a team of `parts` (at most kMaxParts; every thread of the team calls it with
  // the same count): compute(part, step) for its own part, and for late peers' parts, until the
  // last step is done.
  template <class Compute>
  void run(int me, int parts, Compute&& compute) {
    for (;;) {
      const int t = done_.load(std::memory_order_acquire) / parts;
      if (t >= steps_) return;
      if (claim(me, t)) {
        compute(me, t);
        done_.fetch_add(1, std::memory_order_release);
      } else {
        wait_for_step(me, parts, t, compute);
      }
    }
  }

 private:
  // Spins before a thread takes over its peers' parts: ~20-40 us, several steps' time, so that in
  // the common case (everyone on a core of their own) only an owner computes its part.
  static constexpr int kPatience = 1 << 10;
  // Spins after which a thread still waiting (for a part a descheduled peer is computing) yields.
  static constexpr int kSpins = 1 << 14;

  // Part `part` of step t is unclaimed exactly when its last claim was step t - 1.
  bool claim(int part, int t) {
    int last = t - 1;
    return claimed_[part].compare_exchange_strong(last, t, std::memory_order_acq_rel);
  }

  template <class Compute>
  void wait_for_step(int me, int parts, int t, Compute& compute) {
    const int end = (t + 1) * parts;
    for (int spins = 0; done_.load(std::memory_order_acquire) < end; ++spins) {
      if (spins == kPatience) {
        for (int q = 0; q < parts; ++q)
          if (q != me && claim(q, t)) {
            compute(q, t);
            done_.fetch_add(1, std::memory_order_release);
          }
      } else if (spins < kSpins) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

  const int steps_;
  std::atomic<int> claimed_[kMaxParts];   // per part: the last step claimed
  alignas(64) std::atomic<int> done_{0};  // parts done, all steps together
};

}  // namespace speakerseg::cpu
