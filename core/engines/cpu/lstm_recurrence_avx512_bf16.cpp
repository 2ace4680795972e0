// The LSTM recurrence with its products in bf16 (compiled with -mavx512f -mavx512bf16; run only
// where the CPU has AVX512_BF16, and only when asked for: `precision` bf16). vdpbf16ps multiplies
// 32 bf16 pairs and adds them into 16 fp32 sums, so each instruction does the work of two fp32
// FMAs and the packed weights are half the bytes (128 KB per direction at hidden 128). The
// weights are rounded to bf16 at load and h(t-1) at every step (round to nearest even); the
// sums, gates, cell and hidden state stay fp32.
#include "engines/cpu/bf16_pairs_avx512.h"
#include "engines/cpu/lstm_recurrence_avx512_ops.h"

namespace speakerseg::cpu::isa {
namespace {

struct Avx512Bf16 : Avx512 {
  using Weight = uint16_t;  // bf16 bits
  using Hidden = uint32_t;  // two bf16: h[2p] low, h[2p + 1] high
  static constexpr int kPairs = 2;
  static __m512bh splat_hidden(const Hidden* h, int k) {
    return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(h[k / 2])));
  }
  static __m512bh load_weights(const Weight* w) {
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(w));
  }
  static V multiply_add(__m512bh w, __m512bh h, V acc) { return _mm512_dpbf16_ps(acc, w, h); }
  static void to_pairs(const float* h, int hidden, Hidden* out) { to_bf16_pairs(h, hidden, out); }
};

}  // namespace

void run_avx512_bf16(const RecurrenceTask* tasks, int count, int steps, int hidden, int from,
                     int to) {
  run_tasks<Avx512Bf16>(tasks, count, steps, hidden, from, to);
}

}  // namespace speakerseg::cpu::isa
