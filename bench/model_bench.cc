// Model forward-pass benchmarks (Google Benchmark):
// - BM_EncoderMiniLm/{f32,bf16,int8}: MiniLM-L6 shape (384 hidden, 6 layers, 12
//   heads, FFN 1536), 32 sequences x 128 tokens per step; counter tok/s.
// - BM_DecoderTinyLlamaDecode: TinyLlama shape (2048 hidden, 22 layers, 32
//   heads, 4 KV heads, FFN 5632, BF16 weights), one decode step at batch
//   1 / 16 / 32 (sequences sharing 128 tokens of prefilled context);
//   counters ms/step, tok/s, GB/s (weight bytes read per step / step
//   time); compare GB/s with BM_MemoryBandwidth's (the memory-bound
//   optimum).
// - BM_GgufDecode / BM_GgufPrefill: batch-1 decode and a 512-token prefill
//   of the GGUF file INFERD_BENCH_GGUF names, under the activation policy
//   INFERD_BENCH_ACTIVATIONS names (int8, the default here, or exact).
// - BM_MemoryBandwidth: read bandwidth of a 1 GiB buffer on the same threads.
// - BM_DecoderStoriesDecode: the real 260K-parameter stories260K Llama (from
//   the shared models folder), one decode step at batch 1: the fixed
//   per-step cost of the runner and kernels (thread wakeups, bookkeeping).
// The CPU column is the whole process's CPU time (all threads): on a shared,
// busy machine wall time overstates the cost; CPU time / threads is the
// uncontended estimate.
// Models come from tools/make_test_models.py --shape (target
// inferd_model_bench_models); a missing one skips its benchmark.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/cpu/thread_pool.h"
#include "runtime/loader/model_dir.h"
#include "runtime/model/model_registry.h"
#include "runtime/model/model_runner.h"

namespace inferd {
namespace {

constexpr int kThreads = 2;

int Threads() {
  const char* env = std::getenv("INFERD_BENCH_THREADS");
  return env != nullptr ? std::atoi(env) : kThreads;
}

std::string ModelDir(const std::string& name) {
  return absl::StrCat(INFERD_BENCH_MODELS_DIR, "/", name);
}

bool Exists(const std::string& dir) {
  return std::ifstream(dir + "/config.json").good();
}

std::unique_ptr<ModelRunnerBase> MakeRunner(benchmark::State& state,
                                            const std::string& name,
                                            DType dtype) {
  const std::string dir = ModelDir(name);
  if (!Exists(dir)) {
    state.SkipWithError(
        absl::StrCat(dir, " missing: build target inferd_model_bench_models")
            .c_str());
    return nullptr;
  }
  ModelRunnerOptions options;
  options.model_dir = dir;
  options.dtype = dtype;
  options.threads = Threads();
  auto runner = CreateModelRunner(options);
  if (!runner.ok()) {
    state.SkipWithError(runner.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*runner);
}

void BM_MemoryBandwidth(benchmark::State& state) {
  const size_t words = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buffer(words, 1);
  ThreadPool pool(Threads());
  uint64_t total = 0;
  for (auto _ : state) {
    std::vector<uint64_t> partial(64, 0);
    pool.ParallelFor(
        static_cast<int64_t>(words),
        [&](int64_t begin, int64_t end) {
          uint64_t s = 0;
          for (int64_t i = begin; i < end; ++i) s += buffer[i];
          partial[static_cast<size_t>(begin * 63 / words)] += s;
        },
        1 << 20);
    for (uint64_t p : partial) total += p;
  }
  benchmark::DoNotOptimize(total);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(words * sizeof(uint64_t)));
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(words * sizeof(uint64_t)) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MemoryBandwidth)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->MinTime(1.0);

void BM_EncoderMiniLm(benchmark::State& state) {
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kI8};
  const DType dtype = dtypes[state.range(0)];
  auto runner = MakeRunner(state, "minilm-l6", dtype);
  if (runner == nullptr) return;
  constexpr int kSeqs = 32;
  constexpr int kLen = 128;
  BatchPlan plan;
  for (int i = 0; i < kSeqs; ++i) {
    SequencePlan s;
    s.seq_id = i;
    for (int t = 0; t < kLen; ++t) {
      s.token_ids.push_back(1000 + (i * 131 + t * 17) % 20000);
    }
    s.output = StepOutput::kHiddenStates;
    plan.seqs.push_back(s);
  }
  if (!runner->Execute(plan).ok()) {  // warm-up: sizes the workspace
    state.SkipWithError("warm-up step failed");
    return;
  }
  for (auto _ : state) {
    auto result = runner->Execute(plan);
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(result->seqs[0].values.data());
  }
  state.counters["tok/s"] = benchmark::Counter(
      kSeqs * kLen, benchmark::Counter::kIsIterationInvariantRate);
  const char* labels[] = {"f32", "bf16", "int8"};
  state.SetLabel(labels[state.range(0)]);
}
BENCHMARK(BM_EncoderMiniLm)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->MinTime(2.0);

void BM_DecoderTinyLlamaDecode(benchmark::State& state) {
  auto runner = MakeRunner(state, "tinyllama", DType::kBF16);
  if (runner == nullptr) return;
  const int batch = static_cast<int>(state.range(0));
  constexpr int kBlockSize = 16;
  constexpr int kContext = 128;
  constexpr int kMaxLen = kContext + 256;
  // The prefilled context blocks are shared by every sequence of the batch
  // (a common prefix); each sequence writes its own blocks after it.
  constexpr int kSharedBlocks = kContext / kBlockSize;
  constexpr int kOwnBlocks = (kMaxLen - kContext) / kBlockSize;
  if (!runner->AllocateKvCache(kSharedBlocks + batch * kOwnBlocks, kBlockSize)
           .ok()) {
    state.SkipWithError("KV cache allocation failed");
    return;
  }
  std::vector<int32_t> prefix;
  for (int b = 0; b < kSharedBlocks; ++b) prefix.push_back(b);
  BatchPlan prefill;
  SequencePlan p;
  for (int t = 0; t < kContext; ++t) p.token_ids.push_back(100 + t);
  p.block_table = prefix;
  p.output = StepOutput::kLastLogits;
  prefill.seqs.push_back(p);
  if (!runner->Execute(prefill).ok()) {
    state.SkipWithError("prefill failed");
    return;
  }
  BatchPlan decode;
  for (int i = 0; i < batch; ++i) {
    SequencePlan d;
    d.seq_id = i;
    d.token_ids = {42 + i};
    d.block_table = prefix;
    for (int b = 0; b < kOwnBlocks; ++b) {
      d.block_table.push_back(kSharedBlocks + i * kOwnBlocks + b);
    }
    d.output = StepOutput::kLastLogits;
    decode.seqs.push_back(d);
  }
  int pos = kContext;
  for (auto _ : state) {
    for (SequencePlan& d : decode.seqs) d.start_pos = pos;
    auto result = runner->Execute(decode);
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(result->seqs[0].values.data());
    if (++pos >= kMaxLen) pos = kContext;  // keep the context bounded
  }
  // A decode step reads every GEMM weight once (the embedding table only
  // one row, so GB/s slightly overstates the traffic by its 131 MB).
  const double weight_bytes = static_cast<double>(
      runner->weight_bytes_mapped() + runner->weight_bytes_allocated());
  state.counters["ms/step"] =
      benchmark::Counter(1e-3, benchmark::Counter::kIsIterationInvariantRate |
                                   benchmark::Counter::kInvert);
  state.counters["tok/s"] =
      benchmark::Counter(batch, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(
      weight_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB"] = weight_bytes * 1e-9;
  // Converted copies (BF16 checkpoint + BF16 compute: only the norms).
  state.counters["alloc_MB"] =
      static_cast<double>(runner->weight_bytes_allocated()) * 1e-6;
}
BENCHMARK(BM_DecoderTinyLlamaDecode)
    ->ArgName("batch")
    ->Arg(1)
    ->Arg(16)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->MinTime(3.0);

// Decodes one token per benchmark iteration with a single sequence whose
// position cycles through [first_pos, 256) of a 256-token KV cache (what
// came before is whatever the cache holds: the step's cost, not its output,
// is measured). False (and the benchmark skipped) on an error.
bool DecodeOneTokenPerIteration(benchmark::State& state,
                                ModelRunnerBase& runner, int first_pos) {
  constexpr int kBlockSize = 16;
  constexpr int kMaxLen = 256;
  if (!runner.AllocateKvCache(kMaxLen / kBlockSize, kBlockSize).ok()) {
    state.SkipWithError("KV cache allocation failed");
    return false;
  }
  BatchPlan decode;
  SequencePlan d;
  d.token_ids = {42};
  for (int b = 0; b < kMaxLen / kBlockSize; ++b) d.block_table.push_back(b);
  d.output = StepOutput::kLastLogits;
  decode.seqs.push_back(d);
  int pos = first_pos;
  for (auto _ : state) {
    decode.seqs[0].start_pos = pos;
    auto result = runner.Execute(decode);
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      return false;
    }
    benchmark::DoNotOptimize(result->seqs[0].values.data());
    if (++pos >= kMaxLen) pos = first_pos;
  }
  return true;
}

void BM_DecoderStoriesDecode(benchmark::State& state) {
  const std::string dir = INFERD_SHARED_MODELS_DIR "/stories260K";
  if (!Exists(dir)) {
    state.SkipWithError(absl::StrCat(dir, " missing").c_str());
    return;
  }
  ModelRunnerOptions options;
  options.model_dir = dir;
  options.threads = Threads();
  auto created = CreateModelRunner(options);
  if (!created.ok()) {
    state.SkipWithError(created.status().ToString().c_str());
    return;
  }
  if (!DecodeOneTokenPerIteration(state, **created, 0)) return;
  state.counters["us/step"] =
      benchmark::Counter(1e-6, benchmark::Counter::kIsIterationInvariantRate |
                                   benchmark::Counter::kInvert);
}
BENCHMARK(BM_DecoderStoriesDecode)
    ->Unit(benchmark::kMicrosecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->MinTime(1.0);

// The runner of the GGUF file INFERD_BENCH_GGUF names (null and the
// benchmark skipped when it is unset, missing or fails to load); `bytes`
// gets every tensor's bytes (as bench/compare counts them).
std::unique_ptr<ModelRunnerBase> GgufRunner(benchmark::State& state,
                                            double* bytes) {
  const char* path = std::getenv("INFERD_BENCH_GGUF");
  if (path == nullptr || !std::ifstream(path).good()) {
    state.SkipWithError("set INFERD_BENCH_GGUF to a .gguf file");
    return nullptr;
  }
  auto weights = OpenModelWeights(path);
  if (!weights.ok()) {
    state.SkipWithError(weights.status().ToString().c_str());
    return nullptr;
  }
  if (bytes != nullptr) *bytes = static_cast<double>((*weights)->total_bytes());
  ModelRunnerOptions options;
  options.model_dir = path;
  options.weights = std::move(weights).value();
  options.threads = Threads();
  // The activation policy INFERD_BENCH_ACTIVATIONS names: int8 (this
  // benchmark's default: the policy compared with llama.cpp) or exact (the
  // server's default).
  const char* act = std::getenv("INFERD_BENCH_ACTIVATIONS");
  options.activations = act != nullptr && std::string(act) == "exact"
                            ? ActivationPrecision::kExact
                            : ActivationPrecision::kInt8;
  auto created = CreateModelRunner(options);
  if (!created.ok()) {
    state.SkipWithError(created.status().ToString().c_str());
    return nullptr;
  }
  return std::move(created).value();
}

// Batch-1 decode of a GGUF file given by INFERD_BENCH_GGUF (e.g. the
// SmolLM2 file fetch-models.sh brings, or bench/compare's TinyLlama-shaped
// files): ms per decoded token (the time column) at a context of 128-256
// tokens, and the file's tensor bytes per second. The model-side figure the gRPC one
// (bench/compare) is compared with.
void BM_GgufDecode(benchmark::State& state) {
  double bytes = 0;
  std::unique_ptr<ModelRunnerBase> runner = GgufRunner(state, &bytes);
  if (runner == nullptr) return;
  if (!DecodeOneTokenPerIteration(state, *runner, /*first_pos=*/128)) return;
  // The time column is ms per decoded token (one iteration = one token).
  state.counters["weight_GB/s"] = benchmark::Counter(
      bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GgufDecode)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->MinTime(3.0);

// Prefill of a 512-token prompt (pp512) from the GGUF file given by
// INFERD_BENCH_GGUF through the model runner, last-token logits only: the
// time column is ms per prompt, counter tok/s. The model-side figure of
// bench/compare's pp512 column (which also includes the server's
// scheduling and gRPC).
void BM_GgufPrefill(benchmark::State& state) {
  constexpr int kPrompt = 512;
  constexpr int kBlockSize = 16;
  std::unique_ptr<ModelRunnerBase> created = GgufRunner(state, nullptr);
  if (created == nullptr) return;
  ModelRunnerBase& runner = *created;
  if (!runner.AllocateKvCache(kPrompt / kBlockSize, kBlockSize).ok()) {
    state.SkipWithError("KV cache allocation failed");
    return;
  }
  BatchPlan prefill;
  SequencePlan s;
  // Ids spread over the vocabulary's low range (every model has >= 1000).
  for (int i = 0; i < kPrompt; ++i) s.token_ids.push_back(1 + (i * 37) % 997);
  for (int b = 0; b < kPrompt / kBlockSize; ++b) s.block_table.push_back(b);
  s.start_pos = 0;
  s.output = StepOutput::kLastLogits;
  prefill.seqs.push_back(s);
  for (auto _ : state) {
    auto result = runner.Execute(prefill);
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(result->seqs[0].values.data());
  }
  state.counters["tok/s"] = benchmark::Counter(
      kPrompt, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GgufPrefill)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->MinTime(10.0);

}  // namespace
}  // namespace inferd

// BENCHMARK_MAIN, after the start-up registrations inferd's main makes.
int main(int argc, char** argv) {
  inferd::RegisterModelBuiltins();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
