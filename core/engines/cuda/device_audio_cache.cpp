#include "engines/cuda/device_audio_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace speakerseg::cuda {

DeviceAudioCache::DeviceAudioCache(size_t slot_samples, size_t max_slots)
    : slot_samples_(slot_samples), max_slots_(max_slots) {
  if (slot_samples == 0 || max_slots == 0)
    throw std::invalid_argument("DeviceAudioCache: slots of no samples, or no slot");
}

std::unique_ptr<DeviceAudioCache> DeviceAudioCache::for_windows(size_t slots, int max_batch) {
  return std::make_unique<DeviceAudioCache>(
      kWindowSlotSamples, std::max(slots, 2 * static_cast<size_t>(std::max(max_batch, 1))));
}

void DeviceAudioCache::pack(const Plan& plan, float* to) {
  for (const auto& u : plan.uploads) to = std::copy_n(u.from, u.count, to);
}

const DeviceAudioCache::Plan& DeviceAudioCache::plan(const float* const* windows,
                                                     const WindowOrigin* origins, int batch,
                                                     size_t samples) {
  if (2 * static_cast<size_t>(batch) > max_slots_)
    throw EngineError("a batch of " + std::to_string(batch) + " windows needs twice as many " +
                      "slots of device audio, and the engine has " + std::to_string(max_slots_));
  if (samples > slot_samples_)
    throw EngineError("windows of " + std::to_string(samples) + " samples are longer than a " +
                      "slot of device audio (" + std::to_string(slot_samples_) + ")");
  ++batch_;
  // Free what the last batch retired, unless another block took it since (least recently used).
  for (const auto& [slot, block] : retiring_) {
    Slot& s = slots_[slot];
    if (s.free || s.block != block) continue;
    if (block != 0) by_block_.erase(block);
    s.block = 0;
    s.free = true;
    free_.splice(free_.end(), ages_, s.age);
  }
  retiring_.clear();
  plan_.uploads.clear();
  plan_.carries.clear();
  plan_.windows.clear();
  plan_.uploaded = plan_.carried = 0;
  for (int i = 0; i < batch; ++i) {
    const WindowOrigin o = origins ? origins[i] : WindowOrigin{};
    const size_t end = o.offset + samples;
    if (o.block == 0 || end > slot_samples_) {
      const size_t slot = take_slot(0);
      upload(windows[i], slot, 0, samples);
      plan_.windows.emplace_back(slot, 0);
      retire(slot, 0);
      continue;
    }
    const float* block_start = windows[i] - o.offset;
    const auto found = by_block_.find(o.block);
    if (found == by_block_.end()) {
      const size_t slot = take_slot(o.block);
      fill(o, block_start, slot, o.offset, end);
      slots_[slot].lo = o.offset;
      slots_[slot].hi = end;
      plan_.windows.emplace_back(slot, o.offset);
      // The stream has moved on to this block: its previous one is wanted no more.
      if (o.previous != 0) {
        const auto previous = by_block_.find(o.previous);
        if (previous != by_block_.end()) retire(previous->second, o.previous);
      }
      continue;
    }
    const size_t slot = found->second;
    Slot& s = slots_[slot];
    touch(slot);
    if (o.offset >= s.lo && o.offset <= s.hi) {
      // The usual case: the window starts inside the run the slot holds; what it adds past the
      // run's end is the stream's newest audio.
      if (end > s.hi) {
        fill(o, block_start, slot, s.hi, end);
        s.hi = end;
      }
    } else {
      // Not joined to the run (windows dropped in between, say): the slot forgets the run and
      // holds this window's. Samples sit where the block has them, so nothing this batch
      // already placed is overwritten.
      fill(o, block_start, slot, o.offset, end);
      s.lo = o.offset;
      s.hi = end;
    }
    plan_.windows.emplace_back(slot, o.offset);
  }
  windows_planned_ += static_cast<uint64_t>(batch);
  samples_uploaded_ += plan_.uploaded;
  samples_carried_ += plan_.carried;
  return plan_;
}

size_t DeviceAudioCache::take_slot(uint64_t block) {
  size_t slot;
  if (!free_.empty()) {
    slot = free_.front();
    slots_[slot].free = false;
    ages_.splice(ages_.end(), free_, slots_[slot].age);
  } else if (slots_.size() < max_slots_) {
    slot = slots_.size();
    slots_.emplace_back();
    slots_.back().age = ages_.insert(ages_.end(), slot);
  } else {
    // The slot used longest ago; one this batch uses is never it, since a batch uses at most
    // max_slots_ slots and those are the newest.
    slot = ages_.front();
    if (slots_[slot].batch == batch_)
      throw std::logic_error("DeviceAudioCache: every slot is in use by this batch");
    if (slots_[slot].block != 0) by_block_.erase(slots_[slot].block);
  }
  Slot& s = slots_[slot];
  s.block = block;
  s.lo = s.hi = 0;
  if (block != 0) by_block_[block] = slot;
  touch(slot);
  return slot;
}

void DeviceAudioCache::touch(size_t slot) {
  Slot& s = slots_[slot];
  s.batch = batch_;
  ages_.splice(ages_.end(), ages_, s.age);
}

void DeviceAudioCache::fill(const WindowOrigin& origin, const float* block_start, size_t slot,
                            size_t a, size_t b) {
  size_t ca = b, cb = b;  // the part carried, in the block's samples
  const auto previous = origin.previous ? by_block_.find(origin.previous) : by_block_.end();
  if (previous != by_block_.end() && previous->second != slot &&
      slots_[previous->second].filled != batch_) {
    // The previous block's run, where the block carries it: [lo, hi) there is
    // [lo - previous_offset, hi - previous_offset) here.
    const Slot& p = slots_[previous->second];
    const size_t off = origin.previous_offset;
    const size_t lo = std::max({a, p.lo > off ? p.lo - off : size_t{0}});
    const size_t hi = std::min({b, origin.carried, p.hi > off ? p.hi - off : size_t{0}});
    if (lo < hi) {
      ca = lo;
      cb = hi;
    }
  }
  if (a < ca) upload(block_start + a, slot, a, ca - a);
  if (ca < cb) {
    plan_.carries.push_back({previous->second, ca + origin.previous_offset, slot, ca, cb - ca});
    plan_.carried += cb - ca;
    slots_[slot].filled = batch_;
    touch(previous->second);  // not to be taken by another block in this batch
  }
  if (cb < b) upload(block_start + cb, slot, cb, b - cb);
}

void DeviceAudioCache::upload(const float* from, size_t slot, size_t at, size_t count) {
  plan_.uploads.push_back({from, slot, at, count});
  plan_.uploaded += count;
}

}  // namespace speakerseg::cuda
