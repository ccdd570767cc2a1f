// Structured output on llguidance: the per-token cost of the token mask
// (llguidance's mask computation + applying it to the logits + advancing)
// with a real tokenizer's vocabulary (SmolLM2-135M's 49,152 tokens from its
// GGUF file, $INFERD_BENCH_GGUF or the fetched models; llama3's 128,256
// from shared/), reported as p50 / p99 per token; compiling a schema; and
// building llguidance's tokenizer (once per model).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/structured_output.h"
#include "runtime/loader/gguf_tokenizer.h"
#include "runtime/tokenizer/token_bytes.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

constexpr char kSchema[] = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":40},
  "age":{"type":"integer","minimum":0,"maximum":130},
  "email":{"type":"string","maxLength":60},
  "tags":{"type":"array","items":{"enum":["a","b","vip"]},"maxItems":4},
  "address":{"type":"object","properties":{
     "city":{"type":"string","maxLength":30},
     "zip":{"type":"string","minLength":5,"maxLength":5}},
   "required":["city","zip"]}},
  "required":["name","age","address"]})";

struct Setup {
  std::unique_ptr<inferd::Tokenizer> tok;
  std::vector<std::string> bytes;
  std::vector<int32_t> eos;
};

const Setup* Load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Setup>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<inferd::Tokenizer>> t;
  if (name == "smollm2") {
    const char* env = std::getenv("INFERD_BENCH_GGUF");
    const std::string path =
        env != nullptr ? env
                       : std::string(INFERD_REAL_MODELS_DIR) +
                             "/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
    auto gguf = inferd::LoadGgufTokenizer(path);
    if (!gguf.ok()) return nullptr;
    t = inferd::Tokenizer::FromJson(gguf->tokenizer_json);
  } else {
    const char* env = std::getenv("INFERD_SHARED_DIR");
    const std::string shared = env != nullptr ? env : INFERD_SHARED_DIR;
    t = inferd::Tokenizer::FromFile(shared + "/tokenizers/" + name +
                                    "/tokenizer.json");
  }
  if (!t.ok()) return nullptr;
  auto s = std::make_unique<Setup>();
  s->tok = *std::move(t);
  s->bytes = inferd::TokenByteStrings(*s->tok);
  // One more row for EOS (an id past the tokenizer's, as padded models have).
  s->bytes.push_back("");
  s->eos = {static_cast<int32_t>(s->bytes.size()) - 1};
  return (cache[name] = std::move(s)).get();
}

inferd::ConstraintVocabulary Vocab(const Setup* s) {
  inferd::ConstraintVocabulary v;
  v.token_bytes = s->bytes;
  v.eos_ids = s->eos;
  const inferd::Tokenizer* tok = s->tok.get();
  v.tokenize = [tok](absl::string_view text) {
    auto e = tok->Encode(text, false);
    return e.ok() ? e->ids : std::vector<int32_t>();
  };
  return v;
}

inferd::ResponseFormat Format() {
  inferd::ResponseFormat f;
  f.type = inferd::ResponseFormat::Type::kJsonSchema;
  f.spec = kSchema;
  return f;
}

// A token sequence the schema allows, sampled with random logits.
std::vector<int32_t> Trajectory(const Setup& s, inferd::ConstraintCompiler& c,
                                uint64_t seed) {
  const int32_t vocab = static_cast<int32_t>(s.bytes.size());
  inferd::Sampler sampler(vocab);
  inferd::SamplingParams p;
  p.seed = seed;
  inferd::SamplingState st(p, {}, s.eos);
  st.set_constraint(*c.NewConstraint(Format()));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(vocab);
  std::vector<int32_t> ids;
  inferd::SampleResult r;
  for (int i = 0; i < 400; ++i) {
    for (float& x : logits) x = normal(rng);
    if (!sampler.SampleRow(absl::MakeSpan(logits), &st, &r).ok()) break;
    if (r.token_id == s.eos[0]) break;
    ids.push_back(r.token_id);
    if (st.constraint_complete()) break;
  }
  return ids;
}

// Per token: Mask (llguidance computes the mask inline, threads = 0) and
// Advance. Counters: p50 and p99 over every token of every iteration.
void BM_MaskPerToken(benchmark::State& state, const std::string& name) {
  const Setup* s = Load(name);
  if (s == nullptr) {
    state.SkipWithError("tokenizer not found (shared/ or INFERD_BENCH_GGUF)");
    return;
  }
  inferd::ConstraintCompiler compiler([s] { return Vocab(s); }, 0);
  const std::vector<int32_t> ids = Trajectory(*s, compiler, 1);
  std::vector<float> logits(s->bytes.size(), 0.5f);
  std::vector<double> us;
  for (auto _ : state) {
    auto c = compiler.NewConstraint(Format());
    if (!c.ok()) {
      state.SkipWithError(std::string(c.status().message()).c_str());
      return;
    }
    for (int32_t id : ids) {
      const auto t0 = std::chrono::steady_clock::now();
      (*c)->Mask(absl::MakeSpan(logits), s->eos);
      (*c)->Advance(id);
      const auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      benchmark::DoNotOptimize(logits.data());
    }
  }
  std::sort(us.begin(), us.end());
  if (!us.empty()) {
    state.counters["p50_us"] = us[us.size() / 2];
    state.counters["p99_us"] = us[us.size() * 99 / 100];
  }
  state.counters["tokens"] = static_cast<double>(ids.size());
}

// A schema compiled afresh (the first request with it), tokenizer ready.
void BM_CompileSchema(benchmark::State& state, const std::string& name) {
  const Setup* s = Load(name);
  if (s == nullptr) {
    state.SkipWithError("tokenizer not found (shared/ or INFERD_BENCH_GGUF)");
    return;
  }
  inferd::ConstraintCompiler compiler([s] { return Vocab(s); }, 0,
                                      /*max_cached=*/0);
  benchmark::DoNotOptimize(compiler.NewConstraint(Format()));  // tokenizer
  for (auto _ : state) {
    benchmark::DoNotOptimize(compiler.NewConstraint(Format()));
  }
}

// llguidance's tokenizer (its token trie) for a model: once per model.
void BM_TokenizerInit(benchmark::State& state, const std::string& name) {
  const Setup* s = Load(name);
  if (s == nullptr) {
    state.SkipWithError("tokenizer not found (shared/ or INFERD_BENCH_GGUF)");
    return;
  }
  for (auto _ : state) {
    inferd::ConstraintCompiler compiler([s] { return Vocab(s); }, 0);
    benchmark::DoNotOptimize(compiler.NewConstraint(Format()));
  }
}

BENCHMARK_CAPTURE(BM_MaskPerToken, smollm2, "smollm2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskPerToken, llama3, "llama3")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CompileSchema, smollm2, "smollm2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerInit, smollm2, "smollm2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerInit, llama3, "llama3")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
