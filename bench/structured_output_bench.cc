// Structured output: the per-token cost of the token mask (apply + advance)
// with a real tokenizer's vocabulary (SmolLM2-135M's 49,152 tokens from its
// GGUF file, $INFERD_BENCH_GGUF or the fetched models; llama3's 128,256
// from shared/), once the masks of the states a
// generation visits are cached (steady state, e.g. a repeated schema) and
// on a fresh grammar (the first request with a schema: masks built on first
// visit), plus building the vocabulary trie (once per model).
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/token_grammar.h"
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
  std::shared_ptr<const inferd::TokenVocabulary> vocab;
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
    t = inferd::Tokenizer::FromFile(std::string(INFERD_SHARED_DIR) +
                                    "/tokenizers/" + name + "/tokenizer.json");
  }
  if (!t.ok()) return nullptr;
  auto s = std::make_unique<Setup>();
  s->tok = *std::move(t);
  s->vocab = std::make_shared<const inferd::TokenVocabulary>(
      inferd::TokenByteStrings(*s->tok));
  s->eos = {static_cast<int32_t>(s->tok->vocab_size())};  // an id past the vocab
  return (cache[name] = std::move(s)).get();
}

inferd::ResponseFormat Format() {
  inferd::ResponseFormat f;
  f.type = inferd::ResponseFormat::Type::kJsonSchema;
  f.spec = kSchema;
  return f;
}

// A token sequence the grammar allows, sampled with random logits.
std::vector<int32_t> Trajectory(const Setup& s,
                                const std::shared_ptr<const inferd::TokenGrammar>& g,
                                int32_t vocab, uint64_t seed) {
  inferd::Sampler sampler(vocab);
  inferd::SamplingParams p;
  p.seed = seed;
  inferd::SamplingState st(p, {}, s.eos);
  st.set_constraint(std::make_unique<inferd::GrammarConstraint>(g));
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

void RunMask(benchmark::State& state, const std::string& name, bool cold) {
  const Setup* s = Load(name);
  if (s == nullptr) {
    state.SkipWithError("tokenizer not found (shared/ or INFERD_BENCH_GGUF)");
    return;
  }
  const int32_t vocab = static_cast<int32_t>(s->tok->vocab_size()) + 1;
  inferd::GrammarCompiler compiler([s] { return s->vocab; });
  auto g = compiler.Compile(Format());
  if (!g.ok()) {
    state.SkipWithError(std::string(g.status().message()).c_str());
    return;
  }
  const std::vector<int32_t> ids = Trajectory(*s, *g, vocab, 1);
  std::vector<float> logits(vocab, 0.5f);
  int64_t tokens = 0;
  for (auto _ : state) {
    std::shared_ptr<const inferd::TokenGrammar> grammar = *g;
    if (cold) {
      state.PauseTiming();
      inferd::GrammarCompiler fresh([s] { return s->vocab; }, 0);
      grammar = *fresh.Compile(Format());
      state.ResumeTiming();
    }
    inferd::GrammarConstraint c(grammar);
    for (int32_t id : ids) {
      c.Mask(absl::MakeSpan(logits), s->eos);
      c.Advance(id);
      benchmark::DoNotOptimize(logits.data());
    }
    tokens += static_cast<int64_t>(ids.size());
  }
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["us/token"] = benchmark::Counter(
      static_cast<double>(tokens) * 1e-6,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_MaskCached(benchmark::State& state, const std::string& name) {
  RunMask(state, name, false);
}
void BM_MaskFreshGrammar(benchmark::State& state, const std::string& name) {
  RunMask(state, name, true);
}

void BM_VocabularyBuild(benchmark::State& state, const std::string& name) {
  const Setup* s = Load(name);
  if (s == nullptr) {
    state.SkipWithError("tokenizer not found (shared/ or INFERD_BENCH_GGUF)");
    return;
  }
  for (auto _ : state) {
    inferd::TokenVocabulary v(inferd::TokenByteStrings(*s->tok));
    benchmark::DoNotOptimize(v.num_nodes());
  }
}

void BM_CompileSchema(benchmark::State& state) {
  auto vocab = std::make_shared<const inferd::TokenVocabulary>(
      std::vector<std::string>{"a"});
  for (auto _ : state) {
    inferd::GrammarCompiler c([vocab] { return vocab; }, 0);
    benchmark::DoNotOptimize(c.Compile(Format()));
  }
}

BENCHMARK_CAPTURE(BM_MaskCached, smollm2, "smollm2")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MaskCached, llama3, "llama3")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MaskFreshGrammar, smollm2, "smollm2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskFreshGrammar, llama3, "llama3")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VocabularyBuild, smollm2, "smollm2")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileSchema)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
