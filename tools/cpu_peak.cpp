// What one core of this machine can do at most, for docs/performance.md's "distance to the limit":
// fused multiply-adds from registers only (no memory traffic: the arithmetic ceiling; and bf16 dot
// products where the CPU has AVX512_BF16), and vector
// reads of a buffer that stays in L1, in L2 (the LSTM's recurrent matrices: 256 KB per direction
// of segmentation-3.0, 1 MB per GE2E layer) or in memory. One thread, the best instruction set
// the CPU runs and AVX2 beside it.
//
//   cpu_peak [--seconds S] [--json]
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Enough independent chains to cover the FMA latency on every port (Zen: 4 cycles x 2 ports).
__attribute__((target("avx2,fma"), noinline)) float fma_avx2(long iterations) {
  __m256 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long n = 0; n < iterations; ++n)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      acc[i] = _mm256_fmadd_ps(acc[i], a, b);
      __asm__ volatile("" : "+x"(acc[i]));  // keeps the compiler from folding the loop away
    }
  __m256 sum = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  return out[0];
}

__attribute__((target("avx512f"), noinline)) float fma_avx512(long iterations) {
  __m512 acc[24];
#pragma GCC unroll 24
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long n = 0; n < iterations; ++n)
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) {
      acc[i] = _mm512_fmadd_ps(acc[i], a, b);
      __asm__ volatile("" : "+v"(acc[i]));
    }
  __m512 sum = acc[0];
#pragma GCC unroll 24
  for (int i = 1; i < 24; ++i) sum = _mm512_add_ps(sum, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, sum);
  return out[0];
}

// vdpbf16ps: 32 bf16 multiply-adds into 16 fp32 sums per instruction (precision bf16's products).
__attribute__((target("avx512f,avx512bf16"), noinline)) float dot_bf16(long iterations) {
  __m512 acc[24];
#pragma GCC unroll 24
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(1e-7f));
  for (long n = 0; n < iterations; ++n)
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) {
      acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
      __asm__ volatile("" : "+v"(acc[i]));
    }
  __m512 sum = acc[0];
#pragma GCC unroll 24
  for (int i = 1; i < 24; ++i) sum = _mm512_add_ps(sum, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, sum);
  return out[0];
}

__attribute__((target("avx2,fma"), noinline)) float read_avx2(const float* p, size_t floats,
                                                              int passes) {
  __m256 acc[8];
#pragma GCC unroll 8
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int pass = 0; pass < passes; ++pass)
    for (size_t i = 0; i < floats; i += 64)
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_load_ps(p + i + 8 * j));
#pragma GCC unroll 8
  for (int j = 1; j < 8; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  float out[8];
  _mm256_storeu_ps(out, acc[0]);
  return out[0];
}

__attribute__((target("avx512f"), noinline)) float read_avx512(const float* p, size_t floats,
                                                               int passes) {
  __m512 acc[8];
#pragma GCC unroll 8
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int pass = 0; pass < passes; ++pass)
    for (size_t i = 0; i < floats; i += 128)
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_load_ps(p + i + 16 * j));
#pragma GCC unroll 8
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  return out[0];
}

// Best of several timed runs of `run(n)` doing `work(n)` units, each about `seconds` / 5 long.
template <class Run, class Work>
double best_rate(double seconds, long n, Run run, Work work) {
  volatile float sink = 0;
  for (;;) {  // grow n until one run takes 20 ms
    const auto start = Clock::now();
    sink = sink + run(n);
    if (seconds_since(start) > 0.02) break;
    n *= 2;
  }
  double best = 0;
  const auto begin = Clock::now();
  while (seconds_since(begin) < seconds) {
    const auto start = Clock::now();
    sink = sink + run(n);
    best = std::max(best, work(n) / seconds_since(start));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else {
      std::fprintf(stderr, "usage: cpu_peak [--seconds S] [--json]\n");
      return 2;
    }
  }
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx2) {
    std::fprintf(stderr, "cpu_peak: this CPU has no AVX2 with FMA; nothing to measure\n");
    return 1;
  }
  std::vector<std::pair<std::string, double>> out;
  out.emplace_back("fma_avx2_gflops", best_rate(seconds, 1 << 16, fma_avx2,
                                                [](long n) { return 2.0 * 8 * 12 * n / 1e9; }));
  if (avx512)
    out.emplace_back("fma_avx512_gflops", best_rate(seconds, 1 << 16, fma_avx512, [](long n) {
                       return 2.0 * 16 * 24 * n / 1e9;
                     }));
  if (avx512 && __builtin_cpu_supports("avx512bf16"))
    out.emplace_back("dot_bf16_gflops", best_rate(seconds, 1 << 16, dot_bf16,
                                                  [](long n) { return 2.0 * 32 * 24 * n / 1e9; }));
  for (size_t kib : {16, 256, 512, 1024, 65536}) {
    const size_t floats = kib * 1024 / sizeof(float);
    float* buffer = static_cast<float*>(std::aligned_alloc(64, floats * sizeof(float)));
    for (size_t i = 0; i < floats; ++i) buffer[i] = 1e-9f * static_cast<float>(i % 1000);
    auto run = [&](long passes) {
      return avx512 ? read_avx512(buffer, floats, static_cast<int>(passes))
                    : read_avx2(buffer, floats, static_cast<int>(passes));
    };
    out.emplace_back("read_" + std::to_string(kib) + "KiB_GBps",
                     best_rate(seconds, 1, run, [&](long passes) {
                       return static_cast<double>(passes) * floats * sizeof(float) / 1e9;
                     }));
    std::free(buffer);
  }
  if (json) {
    std::printf("{\"isa\": \"%s\"", avx512 ? "avx512" : "avx2");
    for (const auto& [name, value] : out) std::printf(", \"%s\": %.2f", name.c_str(), value);
    std::printf("}\n");
  } else {
    std::printf("one core, best instruction set %s\n", avx512 ? "avx512" : "avx2");
    for (const auto& [name, value] : out) std::printf("  %-22s %8.1f\n", name.c_str(), value);
  }
  return 0;
}
