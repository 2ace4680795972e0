// Where a window lies in audio its stream shares between its overlapping windows (WindowBuffer
// cuts windows as views of blocks of a stream's audio; engines read them). An engine that keeps
// blocks on its device uploads only what it has not seen of one (issue 36 §1).
#pragma once

#include <cstddef>
#include <cstdint>

namespace speakerseg {

struct WindowOrigin {
  // The block, by an id unique while the process runs (0: a window of its own), and the samples
  // from the block's start to the window's. A block's samples never change once written.
  uint64_t block = 0;
  size_t offset = 0;
  // The block's first `carried` samples are block `previous`'s from `previous_offset` on: where
  // a stream's block fills, the next starts with the newest window's worth of it (0: none).
  uint64_t previous = 0;
  size_t previous_offset = 0, carried = 0;
};

}  // namespace speakerseg
