// GE2E on the CPU, laid out like the segmentation engine's LSTM: one input projection per layer
// for every frame of every partial (oneDNN sgemm), then the shared fused recurrence kernel
// (lstm_recurrence.h) step by step, partials split across threads (a few: their hidden units).
// At an emulated precision (cpu_engine.h) every product's operands are rounded, as in
// cpu_engine.cpp.
#include "engines/cpu/cpu_voice_encoder.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engines/cpu/cpu_gemm.h"
#include "engines/cpu/lstm_recurrence.h"

namespace speakerseg {
namespace {

using cpu::gemm;
using cpu::parallel_for;

class CpuVoiceEncoder final : public VoiceEncoder {
 public:
  CpuVoiceEncoder(std::shared_ptr<const VoiceModel> model, const CpuEngineOptions& options)
      : model_(std::move(model)),
        threads_(options.threads > 0 ? options.threads : omp_get_max_threads()),
        rounding_(cpu::emulated_rounding(options.precision)) {
    const cpu::LstmIsa kernel = cpu::recurrence_kernel(options.precision);  // refuses first
    recurrent_weights_.reserve(kVoiceLayers);
    input_weights_.reserve(kVoiceLayers);
    for (const VoiceLstmLayer& layer : model_->lstm) {
      input_weights_.emplace_back(layer.w.data(), kVoiceGates, layer.input_size, options.precision);
      recurrent_weights_.emplace_back(layer.r.data(), layer.bias.data(), kVoiceHidden, kernel,
                                      rounding_);
    }
    if (rounding_ != cpu::Rounding::kNone)
      rounded_linear_ =
          cpu::rounded_copy(rounding_, model_->linear_weight.data(), model_->linear_weight.size());
  }

  std::string description() const override {
    return cpu::engine_description(threads_, cpu::lstm_isa_name(recurrent_weights_[0].isa()),
                                   rounding_);
  }

  void embed(const float* mel, int batch, int frames, float* embeddings) override {
    if (batch < 1) throw EngineError("batch must be at least 1, got " + std::to_string(batch));
    if (frames < 1) throw EngineError("a partial needs at least one mel frame");
    // Without this, every sgemm below ran on all of OpenMP's threads whatever `threads` said
    // (seen as OpenMP workers under ThreadSanitizer).
    cpu::ScopedOmpThreads scoped_threads(threads_);
    const size_t rows = static_cast<size_t>(batch) * frames;
    gates_.resize(rows * kVoiceGates);
    hidden_[0].resize(rows * kVoiceHidden);
    hidden_[1].resize(rows * kVoiceHidden);
    cell_.resize(static_cast<size_t>(batch) * kVoiceHidden);

    const float* in = mel;
    for (int l = 0; l < kVoiceLayers; ++l) {
      const VoiceLstmLayer& w = model_->lstm[l];
      float* out = hidden_[l % 2].data();
      const int chunks = static_cast<int>((rows + kRowBlock - 1) / kRowBlock);
      parallel_for(chunks, threads_, [&](int c, int) {
        const size_t r0 = static_cast<size_t>(c) * kRowBlock;
        const int n = static_cast<int>(std::min<size_t>(kRowBlock, rows - r0));
        input_weights_[l].apply(n, in + r0 * w.input_size, &gates_[r0 * kVoiceGates]);
      });
      // Partials are independent sequences: one group per thread, each stepping through time. A
      // few partials are split by hidden units across the threads instead, all of them sharing
      // each thread's share of the weights: a group per thread would stream the whole 1 MB
      // matrix per core and step (2 threads on Zen 3: at 2 partials 127-140 against 155-194
      // partials/s split, at 4 153-172 against 165-191, at 8 227 against 216).
      const bool split = threads_ > 1 && batch <= kSplitPerThread * threads_;
      const int groups = split ? 1 : std::max(1, std::min(batch, threads_));
      jobs_.resize(groups);
      for (int g = 0; g < groups; ++g) {
        const int b0 = batch * g / groups;
        cpu::LstmRecurrenceJob& job = jobs_[g];
        job.weights = &recurrent_weights_[l];
        job.gates = &gates_[static_cast<size_t>(b0) * frames * kVoiceGates];
        job.gates_sequence = static_cast<size_t>(frames) * kVoiceGates;
        job.gates_step = kVoiceGates;
        job.hidden = out + static_cast<size_t>(b0) * frames * kVoiceHidden;
        job.hidden_sequence = static_cast<size_t>(frames) * kVoiceHidden;
        job.hidden_step = kVoiceHidden;
        job.cell = &cell_[static_cast<size_t>(b0) * kVoiceHidden];
        job.sequences = batch * (g + 1) / groups - b0;
      }
      if (split)
        cpu::run_lstm_recurrence_split(jobs_[0], frames, threads_);
      else
        parallel_for(groups, threads_,
                     [&](int g, int) { cpu::run_lstm_recurrence(&jobs_[g], 1, frames); });
      in = out;
    }

    // The last layer's final hidden state of each partial -> ReLU(linear) -> unit length.
    last_.resize(static_cast<size_t>(batch) * kVoiceHidden);
    for (int b = 0; b < batch; ++b)
      std::copy_n(in + (static_cast<size_t>(b) * frames + frames - 1) * kVoiceHidden, kVoiceHidden,
                  &last_[static_cast<size_t>(b) * kVoiceHidden]);
    cpu::round_in_place(rounding_, last_.data(), last_.size());  // rounded already, if emulated
    gemm(true, batch, kEmbeddingDim, kVoiceHidden, last_.data(), kVoiceHidden,
         rounded_linear_.empty() ? model_->linear_weight.data() : rounded_linear_.data(),
         kVoiceHidden, 0.f, embeddings, kEmbeddingDim);
    for (int b = 0; b < batch; ++b) {
      float* e = embeddings + static_cast<size_t>(b) * kEmbeddingDim;
      double norm = 0;
      for (int k = 0; k < kEmbeddingDim; ++k) {
        e[k] = std::max(0.f, e[k] + model_->linear_bias[k]);
        norm += static_cast<double>(e[k]) * e[k];
      }
      // An all-zero ReLU output has no direction; it stays zero (cosine 0 with everyone).
      const float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.f;
      for (int k = 0; k < kEmbeddingDim; ++k) e[k] *= inv;
    }
  }

 private:
  static constexpr size_t kRowBlock = 512;
  static constexpr int kSplitPerThread = 2;  // batches of up to this many partials a thread: split

  std::shared_ptr<const VoiceModel> model_;
  const int threads_;
  const cpu::Rounding rounding_;       // kNone but at an emulated precision
  std::vector<float> rounded_linear_;  // empty but at an emulated precision
  std::vector<float> gates_, cell_, last_;
  std::vector<cpu::LstmRecurrenceJob> jobs_;
  std::vector<cpu::InputProjection> input_weights_;        // per layer
  std::vector<cpu::PackedLstmWeights> recurrent_weights_;  // per layer
  std::vector<float> hidden_[2];
};

}  // namespace

std::unique_ptr<VoiceEncoder> make_cpu_voice_encoder(std::shared_ptr<const VoiceModel> model,
                                                     const CpuEngineOptions& options) {
  if (!model) throw EngineError("make_cpu_voice_encoder: no voice model");
  return std::make_unique<CpuVoiceEncoder>(std::move(model), options);
}

}  // namespace speakerseg
