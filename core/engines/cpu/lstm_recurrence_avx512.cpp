// The fused LSTM recurrence for AVX-512F (compiled with -mavx512f -mfma; run only where the CPU
// has it): 16 lanes, 32 registers, so up to 4 sequences share each weight load.
#include "engines/cpu/lstm_recurrence_avx512_ops.h"

namespace speakerseg::cpu::isa {

void run_avx512(const RecurrenceTask* tasks, int count, int steps, int hidden, int from, int to) {
  run_tasks<Avx512>(tasks, count, steps, hidden, from, to);
}

}  // namespace speakerseg::cpu::isa
