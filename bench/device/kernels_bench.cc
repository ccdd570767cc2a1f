// Kernel benchmarks: Linear (F32 / BF16 weights; quantized and F16 weights in
// BM_QuantLinear, at M = 512 in BM_QuantLinearPrefill) GEMM and decode GEMV,
// encoder self-attention (BM_EncoderAttention)
// on the cpu device, with the machine's measured FP32 FMA peak, vdpbf16ps
// peak and streaming-read bandwidth as reference counters. The CPU column is the whole
// process's CPU time (all threads), for comparisons on a busy machine.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

#include "device/bf16.h"
#include "device/cpu/cpu_features.h"
#include "device/cpu/thread_pool.h"
#include "device/device.h"
#include "device/ops.h"
#include "device/quant.h"

namespace inferd {
namespace bench {

double FmaLoop(int64_t iters);
double Bf16DotLoop(int64_t iters);
double VnniDotLoop(int64_t iters);
double AmxBf16Loop(int64_t iters);
double AmxInt8Loop(int64_t iters);
void EigenLinear(const float* x, const float* w, float* y, int64_t m,
                 int64_t n, int64_t k, int64_t n_begin, int64_t n_end);

namespace {

// CPU time of the calling thread (seconds).
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// GFLOP/s of `loop` on `threads` threads at once (best of 3). Each thread's
// rate is taken over its own CPU time, so time the thread spent descheduled
// on a busy machine does not count: this is the uncontended peak.
double MeasurePeak(double (*loop)(int64_t), int threads, int64_t iters = 20'000'000) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> ts;
    std::vector<double> rate(threads);
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const double c0 = ThreadCpuSeconds();
        const double flops = loop(iters);
        rate[t] = flops / (ThreadCpuSeconds() - c0);
      });
    }
    for (auto& t : ts) t.join();
    double total = 0;
    for (double r : rate) total += r;
    best = std::max(best, total / 1e9);
  }
  return best;
}

// Streaming-read bandwidth (GB/s) over a 512 MiB buffer on `threads` threads,
// each over its own CPU time (memory stalls count as CPU time; preemption
// does not).
double MeasureBandwidth(int threads) {
  const size_t n = (512u << 20) / sizeof(float);
  static std::vector<float>* buf = new std::vector<float>(n, 1.0f);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> ts;
    std::vector<float> sums(threads);
    std::vector<double> rate(threads);
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const double c0 = ThreadCpuSeconds();
        const size_t b = n / threads * t, e = n / threads * (t + 1);
        float s[16] = {};
        for (size_t i = b; i < e; i += 16) {
          for (int l = 0; l < 16; ++l) s[l] += (*buf)[i + l];
        }
        float tot = 0;
        for (float x : s) tot += x;
        sums[t] = tot;
        rate[t] = (e - b) * sizeof(float) / (ThreadCpuSeconds() - c0);
      });
    }
    for (auto& t : ts) t.join();
    benchmark::DoNotOptimize(sums.data());
    double total = 0;
    for (double r : rate) total += r;
    best = std::max(best, total / 1e9);
  }
  return best;
}

// GFLOP/s (GOP/s for the integer units) by thread count 1, 2; 0 where the
// CPU lacks the unit.
struct Machine {
  double fma_peak[3] = {0, 0, 0};
  double bf16_peak[3] = {0, 0, 0};
  double vnni_peak[3] = {0, 0, 0};      // vpdpbusd (int8)
  double amx_bf16_peak[3] = {0, 0, 0};  // tdpbf16ps
  double amx_int8_peak[3] = {0, 0, 0};  // tdpbusd
  double bandwidth[3] = {0, 0, 0};
};

const Machine& GetMachine() {
  static const Machine* m = [] {
    auto* mm = new Machine;
    const bool avx512 = DetectedCpuIsa() >= CpuIsa::kAvx512;
    const bool bf16 = DetectedCpuIsa() >= CpuIsa::kAvx512Bf16;
    const bool vnni = avx512 && __builtin_cpu_supports("avx512vnni");
    std::string no_amx;
    const bool amx = AmxUsable(&no_amx);
    for (int t : {1, 2}) {
      if (avx512) mm->fma_peak[t] = MeasurePeak(&FmaLoop, t);
      if (bf16) mm->bf16_peak[t] = MeasurePeak(&Bf16DotLoop, t);
      if (vnni) mm->vnni_peak[t] = MeasurePeak(&VnniDotLoop, t);
      if (amx) {
        // A tile instruction does 16-32x an AVX-512 one's work.
        mm->amx_bf16_peak[t] = MeasurePeak(&AmxBf16Loop, t, 1'000'000);
        mm->amx_int8_peak[t] = MeasurePeak(&AmxInt8Loop, t, 1'000'000);
      }
      mm->bandwidth[t] = MeasureBandwidth(t);
      std::fprintf(stderr,
                   "machine, %d thread(s): FP32 FMA peak %.1f GFLOP/s, BF16 "
                   "dot peak %.1f GFLOP/s, int8 dot (vpdpbusd) peak %.1f GOP/s, "
                   "stream read %.1f GB/s\n",
                   t, mm->fma_peak[t], mm->bf16_peak[t], mm->vnni_peak[t], mm->bandwidth[t]);
      if (amx) {
        std::fprintf(stderr,
                     "machine, %d thread(s): AMX BF16 (tdpbf16ps) peak %.1f GFLOP/s, "
                     "AMX INT8 (tdpbusd) peak %.1f GOP/s\n",
                     t, mm->amx_bf16_peak[t], mm->amx_int8_peak[t]);
      }
    }
    if (!amx) std::fprintf(stderr, "machine: no AMX peaks measured: %s\n", no_amx.c_str());
    if (DetectedCpuIsa() >= CpuIsa::kAvx512Bf16) {
      std::fprintf(stderr,
                   "BF16-weight GEMM policy auto: vdpbf16ps / FMA rate %.2f -> %s\n",
                   Bf16DotToFmaRate(), Bf16DotToFmaRate() > 1.0 ? "dot" : "widen");
    }
    return mm;
  }();
  return *m;
}

Device* DeviceWithThreads(int threads) {
  static Device* devs[3] = {nullptr, nullptr, nullptr};
  if (devs[threads] == nullptr) {
    devs[threads] = DeviceRegistry::Create("cpu", DeviceOptions{threads})->release();
  }
  return devs[threads];
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Args: M, N, K, bf16 (0/1), threads.
void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool bf16 = state.range(3) != 0;
  const int threads = static_cast<int>(state.range(4));
  const Machine& mach = GetMachine();
  std::vector<float> x = Random(m * k, 1), w = Random(n * k, 2), y(m * n);
  std::vector<uint16_t> w16(n * k);
  for (int64_t i = 0; i < n * k; ++i) w16[i] = FloatToBf16(w[i]);
  TensorView wv = bf16 ? TensorView::Contiguous(w16.data(), DType::kBF16, {n, k})
                       : TensorView::Contiguous(w.data(), DType::kF32, {n, k});
  ExecutionContext ctx{DeviceWithThreads(threads), KernelChoice::kOptimized};
  // packed: the weight in the GEMM's layout from load (PackLinearWeight),
  // as encoders keep theirs; none where the CPU has no such layout.
  DeviceBuffer packed;
  if (state.range(5) != 0) {
    absl::StatusOr<DeviceBuffer> p = PackLinearWeight(ctx, wv);
    if (!p.ok()) {
      state.SkipWithError(p.status().ToString().c_str());
      return;
    }
    packed = std::move(*p);
    wv.packed = packed.size() > 0 ? packed.data() : nullptr;
  }
  for (auto _ : state) {
    auto st = Linear(ctx, TensorView::Contiguous(x.data(), DType::kF32, {m, k}), wv,
                     TensorView{}, TensorView::Contiguous(y.data(), DType::kF32, {m, n}));
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * m * n * k;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
  const double peak = bf16 && m > 8 ? mach.bf16_peak[threads] : mach.fma_peak[threads];
  state.counters["peak_GFLOP/s"] = peak;
  const double gbytes = n * k * (bf16 ? 2.0 : 4.0) / 1e9;
  state.counters["weight_GB/s"] = benchmark::Counter(gbytes * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["mem_bw_GB/s"] = mach.bandwidth[threads];
}

// Weight dtypes of BM_QuantLinear, by index.
constexpr DType kQuantBenchDTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0,
                                       DType::kQ4_K, DType::kQ6_K, DType::kF16,
                                       DType::kBF16, DType::kQ5_0, DType::kQ5_1};

// Args: M, N, K, dtype (index into kQuantBenchDTypes), threads, act (the
// activation policy of block-quantized weights: 0 exact, 1 int8 on the
// weights as stored, 2 int8 on the int8 panels decoders load under that
// policy; weight_GB/s counts the panels' bytes). Decode with
// quantized / half-precision weights. The weights rotate over enough copies
// (>= 512 MB in all) that each call streams them from memory, as a model's
// layers do, instead of from the last-level cache.
void BM_QuantLinear(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const DType dtype = kQuantBenchDTypes[state.range(3)];
  const int threads = static_cast<int>(state.range(4));
  const bool act_int8 = state.range(5) != 0;
  const Machine& mach = GetMachine();
  std::vector<float> x = Random(m * k, 1), y(m * n);
  const size_t row_bytes = DTypeRowBytes(dtype, k);
  const size_t bytes = row_bytes * n;
  const int copies = static_cast<int>(std::min<size_t>(256, (size_t{512} << 20) / bytes + 1));
  std::vector<uint8_t> w(bytes * copies);
  {
    std::vector<float> wf = Random(n * k, 2);
    for (int64_t r = 0; r < n; ++r) {
      if (!QuantizeRow(dtype, wf.data() + r * k, k, w.data() + r * row_bytes).ok()) {
        state.SkipWithError("QuantizeRow failed");
        return;
      }
    }
    for (int c = 1; c < copies; ++c) std::copy(w.begin(), w.begin() + bytes, w.begin() + c * bytes);
  }
  ExecutionContext ctx{DeviceWithThreads(threads), KernelChoice::kOptimized};
  // Up to 64 rows: a decode-only step's (the model runner's decode_rows).
  ctx.decode_rows = m <= 64;
  ctx.activations = act_int8 ? ActivationPrecision::kInt8 : ActivationPrecision::kExact;
  std::vector<DeviceBuffer> panels;
  size_t streamed = bytes;
  if (state.range(5) == 2) {
    for (int c = 0; c < copies; ++c) {
      absl::StatusOr<DeviceBuffer> p =
          PackLinearWeight(ctx, TensorView::Contiguous(w.data() + c * bytes, dtype, {n, k}));
      if (!p.ok() || p->size() == 0) {
        state.SkipWithError("no int8 panels for this dtype / CPU");
        return;
      }
      streamed = p->size();
      panels.push_back(std::move(*p));
    }
  }
  int c = 0;
  for (auto _ : state) {
    TensorView wv = TensorView::Contiguous(w.data() + c * bytes, dtype, {n, k});
    if (!panels.empty()) wv.packed = panels[c].data();
    c = (c + 1) % copies;
    auto st = Linear(ctx, TensorView::Contiguous(x.data(), DType::kF32, {m, k}), wv,
                     TensorView{}, TensorView::Contiguous(y.data(), DType::kF32, {m, n}));
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(DTypeName(dtype)) +
                 (panels.empty() ? (act_int8 ? " int8-x" : "") : " int8-panels"));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] =
      benchmark::Counter(streamed / 1e9 * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["mem_bw_GB/s"] = mach.bandwidth[threads];
  // The fraction of the probe's stream read the weights move at.
  if (mach.bandwidth[threads] > 0) {
    state.counters["of_stream"] = benchmark::Counter(
        streamed / 1e9 * state.iterations() / mach.bandwidth[threads], benchmark::Counter::kIsRate);
  }
  // The unit this path computes on (quant_linear_cpu.cc: int8 dot products
  // for block-quantized weights from M = 8 in decode, above 64 otherwise,
  // and the M = 1 GEMV) and the fraction of its peak reached; with AMX the
  // fraction of its INT8 tile peak too (no inferd kernel uses AMX yet).
  const bool int8 = IsBlockQuantized(dtype) && mach.vnni_peak[threads] > 0 &&
                    ActiveCpuIsa() >= CpuIsa::kAvx512Bf16;
  const double peak = int8 ? mach.vnni_peak[threads] : mach.fma_peak[threads];
  state.counters["peak_GOP/s"] = peak;
  if (peak > 0) {
    state.counters["of_peak"] = benchmark::Counter(
        2.0 * m * n * k * state.iterations() / 1e9 / peak, benchmark::Counter::kIsRate);
  }
  if (mach.amx_int8_peak[threads] > 0) {
    state.counters["of_amx_int8_peak"] =
        benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9 /
                               mach.amx_int8_peak[threads],
                           benchmark::Counter::kIsRate);
  }
}

// Whether dtype (an index into kQuantBenchDTypes) has the int8 policy.
bool HasInt8Policy(int d) { return IsBlockQuantized(kQuantBenchDTypes[d]); }

// TinyLlama-1.1B projections (q/o, gate/up, down, lm_head), M = 1 and 16,
// each activation policy.
void QuantArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int m : {1, 16}) {
      for (int d = 0; d < static_cast<int>(std::size(kQuantBenchDTypes)); ++d) {
        for (int act = 0; act <= (HasInt8Policy(d) ? 2 : 0); ++act) {
          b->Args({m, 2048, 2048, d, threads, act});
          b->Args({m, 5632, 2048, d, threads, act});
          b->Args({m, 2048, 5632, d, threads, act});
          b->Args({m, 32000, 2048, d, threads, act});
        }
      }
    }
  }
  b->ArgNames({"M", "N", "K", "dtype", "threads", "act"});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()->MinTime(0.3);
}

BENCHMARK(BM_QuantLinear)->Apply(QuantArgs);

// Batched decode, M = 2 .. 32 at the q/o shape (2048 x 2048), one thread:
// the small-M kernels' cost per activation row (compute-bound; compare
// with M = 1 and with the int8 GEMM above M = 64).
void QuantSmallMArgs(benchmark::internal::Benchmark* b) {
  for (int m : {2, 4, 6, 8, 12, 16, 32, 64}) {
    for (int d = 0; d < 5; ++d) {
      for (int act : {0, 1, 2}) b->Args({m, 2048, 2048, d, 1, act});
    }
  }
  b->ArgNames({"M", "N", "K", "dtype", "threads", "act"});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()->MinTime(0.3);
}

BENCHMARK(BM_QuantLinear)->Name("BM_QuantLinearSmallM")->Apply(QuantSmallMArgs);

// Prefill (M = 512) at the TinyLlama projection shapes: compute-bound, so
// counter GFLOP/s (2 M N K per call).
void QuantPrefillArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int d = 0; d < static_cast<int>(std::size(kQuantBenchDTypes)); ++d) {
      for (int act = 0; act <= (HasInt8Policy(d) ? 2 : 0); act += 2) {
        b->Args({512, 2048, 2048, d, threads, act});
        b->Args({512, 5632, 2048, d, threads, act});
        b->Args({512, 2048, 5632, d, threads, act});
      }
    }
  }
  b->ArgNames({"M", "N", "K", "dtype", "threads", "act"});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()->MinTime(0.5);
}

BENCHMARK(BM_QuantLinear)->Name("BM_QuantLinearPrefill")->Apply(QuantPrefillArgs);

// A serving step of 16 decodes and a 64- or 128-token prompt chunk (M = 80,
// 144) at the TinyLlama shapes with F16 and Q8_0 weights, 2 threads: the
// weights stream from memory once per step (see BM_QuantLinear) while
// being packed for the GEMM.
void QuantMixedStepArgs(benchmark::internal::Benchmark* b) {
  for (int m : {80, 144}) {
    for (int d : {2, 3, 5}) {  // Q8_0, Q4_K, F16
      for (int act = 0; act <= (HasInt8Policy(d) ? 1 : 0); ++act) {
        b->Args({m, 2048, 2048, d, 2, act});
        b->Args({m, 5632, 2048, d, 2, act});
        b->Args({m, 2048, 5632, d, 2, act});
      }
    }
  }
  b->ArgNames({"M", "N", "K", "dtype", "threads", "act"});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()->MinTime(0.5);
}

BENCHMARK(BM_QuantLinear)->Name("BM_QuantLinearMixedStep")->Apply(QuantMixedStepArgs);

// Args: M, dtype, act (as BM_QuantLinear). The decode kernels' compute ceiling: a 256 x 2048 weight
// (<= 1 MB) called repeatedly stays in L2, so memory bandwidth is out of
// the picture. One thread.
void BM_QuantLinearL2(benchmark::State& state) {
  const int64_t m = state.range(0), n = 256, k = 2048;
  const DType dtype = kQuantBenchDTypes[state.range(1)];
  std::vector<float> x = Random(m * k, 1), y(m * n), wf = Random(n * k, 2);
  const size_t row_bytes = DTypeRowBytes(dtype, k);
  std::vector<uint8_t> w(row_bytes * n);
  for (int64_t r = 0; r < n; ++r) {
    if (!QuantizeRow(dtype, wf.data() + r * k, k, w.data() + r * row_bytes).ok()) {
      state.SkipWithError("QuantizeRow failed");
      return;
    }
  }
  ExecutionContext ctx{DeviceWithThreads(1), KernelChoice::kOptimized};
  const bool act_int8 = state.range(2) != 0;
  ctx.activations = act_int8 ? ActivationPrecision::kInt8 : ActivationPrecision::kExact;
  for (auto _ : state) {
    auto st = Linear(ctx, TensorView::Contiguous(x.data(), DType::kF32, {m, k}),
                     TensorView::Contiguous(w.data(), dtype, {n, k}), TensorView{},
                     TensorView::Contiguous(y.data(), DType::kF32, {m, n}));
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(DTypeName(dtype)) + (act_int8 ? " int8-x" : ""));
  state.counters["Gweights/s"] = benchmark::Counter(
      1e-9 * static_cast<double>(n * k) * state.iterations(), benchmark::Counter::kIsRate);
}

void QuantL2Args(benchmark::internal::Benchmark* b) {
  for (int m : {1, 16}) {
    for (int d = 0; d < static_cast<int>(std::size(kQuantBenchDTypes)); ++d) {
      for (int act = 0; act <= (HasInt8Policy(d) ? 1 : 0); ++act) b->Args({m, d, act});
    }
  }
  b->ArgNames({"M", "dtype", "act"});
  b->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime()->MinTime(0.2);
}

BENCHMARK(BM_QuantLinearL2)->Apply(QuantL2Args);

// Eigen F32 GEMM, N split across threads (comparison only).
void BM_EigenLinearF32(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(4));
  const Machine& mach = GetMachine();
  std::vector<float> x = Random(m * k, 1), w = Random(n * k, 2), y(m * n);
  ThreadPool* pool = DeviceWithThreads(threads)->thread_pool();
  for (auto _ : state) {
    pool->ParallelFor(threads, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        EigenLinear(x.data(), w.data(), y.data(), m, n, k, n * t / threads, n * (t + 1) / threads);
      }
    });
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.counters["peak_GFLOP/s"] = mach.fma_peak[threads];
}

void GemmArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({512, 4096, 4096, 0, threads, 0});
    b->Args({512, 4096, 4096, 1, threads, 0});
    b->Args({4096, 384, 384, 0, threads, 0});
    b->Args({4096, 1536, 384, 0, threads, 0});
    b->Args({4096, 384, 1536, 0, threads, 0});
    // MiniLM-shaped steps of one single-threaded replica (4 x 128 tokens):
    // fused qkv, FFN up, FFN down, F32 and BF16 weights.
    for (int bf16 : {0, 1}) {
      b->Args({512, 1152, 384, bf16, threads, 1});
      b->Args({512, 1536, 384, bf16, threads, 1});
      b->Args({512, 384, 1536, bf16, threads, 1});
    }
    b->Args({1, 2048, 2048, 1, threads, 0});
    b->Args({1, 5632, 2048, 1, threads, 0});
    // Continuous-batching decode: small M against streamed weights.
    for (int m : {16, 32, 64}) {
      for (int bf16 : {1, 0}) {
        b->Args({m, 2048, 2048, bf16, threads, 0});
        b->Args({m, 5632, 2048, bf16, threads, 0});
      }
      b->Args({m, 2048, 2048, 1, threads, 1});
    }
  }
  b->ArgNames({"M", "N", "K", "bf16", "threads", "packed"});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()->MinTime(1.0);
}

BENCHMARK(BM_Linear)->Apply(GemmArgs);
BENCHMARK(BM_EigenLinearF32)
    ->Args({512, 4096, 4096, 0, 1})
    ->Args({512, 4096, 4096, 0, 2})
    ->Args({4096, 384, 384, 0, 2})
    ->ArgNames({"M", "N", "K", "bf16", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()->UseRealTime()
    ->MinTime(1.0);

// Args: sequences, tokens per sequence, threads. Encoder self-attention of
// the MiniLM-L6 shape (12 heads of 32, bidirectional) on the fused QKV
// activation layout the encoders use (q, k, v as column slices of one
// [tokens][3 x 384] buffer); counter: FMA GFLOP/s of QK^T and PV.
void BM_EncoderAttention(benchmark::State& state) {
  const int64_t seqs = state.range(0), len = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  constexpr int kHeads = 12, kDim = 32, kHidden = kHeads * kDim;
  const int64_t tokens = seqs * len;
  std::vector<float> qkv = Random(tokens * 3 * kHidden, 3), out(tokens * kHidden);
  std::vector<int32_t> cu(seqs + 1);
  for (int64_t s = 0; s <= seqs; ++s) cu[s] = static_cast<int32_t>(s * len);
  auto slice = [&](int part) {
    TensorView t = TensorView::Contiguous(qkv.data() + part * kHidden, DType::kF32,
                                          {tokens, kHidden});
    t.strides[0] = 3 * kHidden;
    return t;
  };
  AttentionParams p;
  p.num_heads = p.num_kv_heads = kHeads;
  p.head_dim = kDim;
  p.causal = false;
  ExecutionContext ctx{DeviceWithThreads(threads), KernelChoice::kOptimized};
  for (auto _ : state) {
    auto st = VarlenAttention(
        ctx, slice(0), slice(1), slice(2),
        TensorView::Contiguous(cu.data(), DType::kI32, {seqs + 1}), p,
        TensorView::Contiguous(out.data(), DType::kF32, {tokens, kHidden}));
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    benchmark::ClobberMemory();
  }
  const double flops = 4.0 * seqs * len * len * kHidden;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EncoderAttention)
    ->Args({4, 128, 1})
    ->Args({4, 512, 1})
    ->Args({32, 128, 2})
    ->ArgNames({"seqs", "len", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()->UseRealTime()
    ->MinTime(1.0);

}  // namespace
}  // namespace bench
}  // namespace inferd

// BENCHMARK_MAIN, after the start-up registrations inferd's main makes.
int main(int argc, char** argv) {
  inferd::RegisterDeviceBuiltins();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
