// Streams' audio kept on the device, so that a window costs the upload of the samples its
// stream added since its last window (a step: 1 s of a 10 s window), not the whole window
// (issue 36 §1). This is the bookkeeping, plain C++: which host samples go to which slot of
// device memory, and where each window of a batch then lies; the CUDA engine makes the copies.
//
// A slot holds one block of a stream's shared audio (WindowOrigin), sample j of the block at
// sample j of the slot, and remembers the one run of the block it holds. A window whose block
// is in a slot uploads what its run lacks; a window of another block takes a free slot, or the
// one used longest ago. A stream's new block starts with the newest window's worth of its
// previous block: that part is copied on the device from the previous block's slot where it is
// there, so that a stream's audio crosses the bus about once. A block's samples never change
// once written, and a recycled block comes back under a new id, so what a slot holds never goes
// stale. A window of its own (block 0), or one that does not fit a slot, is uploaded whole into a
// slot that is free again after the batch; so is a block's slot once its stream's next block has
// come (a stream's windows come in order, so none of the old block follows). Slots in use follow
// the streams, not the running time: about one a stream.
//
// The engine makes a batch's copies in three steps, each finished before the next: the uploads,
// then the copies between slots (their sources hold this batch's uploads; a slot that a copy
// fills is never a source in the same batch), then the windows out of their slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engines/segmentation_engine.h"
#include "model/model_spec.h"

namespace speakerseg::cuda {

class DeviceAudioCache {
 public:
  // Slots of `slot_samples` samples, at most `max_slots`: a batch needs two a window (its block's
  // and the previous block's).
  DeviceAudioCache(size_t slot_samples, size_t max_slots);
  // The CUDA engine's (and the replay's that models its host side): slots of a block of
  // WindowBuffer's for 10 s windows at any step (at most two windows), `slots` of them but at
  // least two a window of `max_batch`.
  static constexpr size_t kWindowSlotSamples = 2 * static_cast<size_t>(kWindowSamples);
  static std::unique_ptr<DeviceAudioCache> for_windows(size_t slots, int max_batch);

  // Host samples [from, from + count) to slot `slot` at sample `at`.
  struct Upload {
    const float* from = nullptr;
    size_t slot = 0, at = 0, count = 0;
  };
  // Samples [from_at, from_at + count) of slot `from` to slot `to` at `at`.
  struct Carry {
    size_t from = 0, from_at = 0, to = 0, at = 0, count = 0;
  };
  struct Plan {
    // Two uploads of a batch reach the same samples of a slot only with the same values (a
    // block's), so they may be made in any order, or at once.
    std::vector<Upload> uploads;
    // Per window: its slot and its first sample there.
    std::vector<std::pair<size_t, size_t>> windows;
    std::vector<Carry> carries;
    size_t uploaded = 0, carried = 0;  // samples the uploads and the carries hold
  };

  // Plans a batch: window i at windows[i] on the host, from origins[i], `samples` long. Valid
  // until the next call.
  const Plan& plan(const float* const* windows, const WindowOrigin* origins, int batch,
                   size_t samples);
  // Copies the plan's uploads one after the other into `to` (plan.uploaded samples): what
  // crosses the bus. Upload i starts at the sum of the counts before it.
  static void pack(const Plan& plan, float* to);

  size_t slot_samples() const { return slot_samples_; }
  size_t max_slots() const { return max_slots_; }
  // Slots ever used: the device memory must hold this many (it grows as streams come).
  size_t slots_used() const { return slots_.size(); }
  // Slots that hold a block a later window may use.
  size_t slots_holding() const { return by_block_.size(); }
  // Across every plan: windows planned, and samples uploaded.
  uint64_t windows_planned() const { return windows_planned_; }
  uint64_t samples_uploaded() const { return samples_uploaded_; }
  uint64_t samples_carried() const { return samples_carried_; }

 private:
  struct Slot {
    uint64_t block = 0;     // 0: holds nothing that a later window may use
    size_t lo = 0, hi = 0;  // the run of the block it holds
    uint64_t batch = 0;     // the last batch that used it
    uint64_t filled = 0;    // the last batch that carried samples into it
    bool free = false;
    std::list<size_t>::iterator age;  // in ages_, or (free) in free_
  };
  // A slot for a window of `block` (0: its own) in this batch: taken and marked used.
  size_t take_slot(uint64_t block);
  void touch(size_t slot);
  // After this batch `slot` (holding `block`; 0: a window of its own) is free for another.
  void retire(size_t slot, uint64_t block) { retiring_.emplace_back(slot, block); }
  void upload(const float* from, size_t slot, size_t at, size_t count);
  // Places samples [a, b) of the block of `origin` (its samples at `block_start` on the host)
  // into `slot`: carried from the previous block's slot where it holds them, uploaded otherwise.
  void fill(const WindowOrigin& origin, const float* block_start, size_t slot, size_t a, size_t b);

  const size_t slot_samples_, max_slots_;
  std::vector<Slot> slots_;
  std::list<size_t> ages_;  // slots in use, used longest ago first
  std::list<size_t> free_;  // slots free for another block
  std::vector<std::pair<size_t, uint64_t>> retiring_;
  std::unordered_map<uint64_t, size_t> by_block_;
  uint64_t batch_ = 0;
  Plan plan_;
  uint64_t windows_planned_ = 0, samples_uploaded_ = 0, samples_carried_ = 0;
};

}  // namespace speakerseg::cuda
