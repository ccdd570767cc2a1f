// Single-thread tokenizer throughput on a few MB of mixed text: the shared
// case texts repeated plus generated English-like prose, encoded as ~1 KiB
// documents. Reports bytes/s and tokens/s per tokenizer.
#include <benchmark/benchmark.h>

#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::vector<std::string>& Documents() {
  static const std::vector<std::string>* docs = [] {
    std::string corpus;
    const std::string cases = std::string(INFERD_SHARED_DIR) + "/tokenizers/cases/";
    std::string mixed;
    for (const char* n : {"llama3", "bert-base-uncased"}) mixed += ReadFile(cases + n + ".inp");
    size_t pos;
    while ((pos = mixed.find("__ggml_vocab_test__")) != std::string::npos) {
      mixed.erase(pos, 19);
    }
    static const char* kWords[] = {
        "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as",
        "was", "with", "be", "by", "on", "not", "he", "this", "are", "or",
        "his", "from", "at", "which", "but", "have", "an", "had", "they",
        "you", "were", "their", "one", "all", "we", "can", "her", "has",
        "there", "been", "if", "more", "when", "will", "would", "who", "so",
        "inference", "server", "tokenizer", "throughput", "latency", "model",
        "embedding", "request", "batch", "schedule", "memory", "Hello",
        "World", "Paris", "2024", "3.14", "don't", "it's", "GPU", "CPU"};
    std::mt19937 rng(42);
    std::uniform_int_distribution<size_t> word(0, sizeof(kWords) / sizeof(kWords[0]) - 1);
    std::uniform_int_distribution<int> punct(0, 14);
    while (corpus.size() < (4u << 20)) {
      if (corpus.size() % 5 == 0 && !mixed.empty()) corpus += mixed;
      for (int s = 0; s < 200; ++s) {
        const int len = 8 + static_cast<int>(word(rng) % 12);
        for (int w = 0; w < len; ++w) {
          if (w) corpus += ' ';
          corpus += kWords[word(rng)];
          const int p = punct(rng);
          if (p == 0) corpus += ',';
          if (p == 1) corpus += ';';
        }
        corpus += punct(rng) < 2 ? "?\n" : ". ";
      }
    }
    auto* out = new std::vector<std::string>();
    size_t i = 0;
    while (i < corpus.size()) {
      size_t end = std::min(corpus.size(), i + 1024);
      while (end < corpus.size() && (static_cast<unsigned char>(corpus[end]) & 0xC0) == 0x80) ++end;
      out->push_back(corpus.substr(i, end - i));
      i = end;
    }
    return out;
  }();
  return *docs;
}

const inferd::Tokenizer* Load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<inferd::Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto t = inferd::Tokenizer::FromFile(std::string(INFERD_SHARED_DIR) +
                                       "/tokenizers/" + name + "/tokenizer.json");
  if (!t.ok()) return nullptr;
  return (cache[name] = *std::move(t)).get();
}

void BM_Encode(benchmark::State& state, const std::string& name) {
  const inferd::Tokenizer* tok = Load(name);
  if (tok == nullptr) {
    state.SkipWithError("tokenizer not found under shared/");
    return;
  }
  const auto& docs = Documents();
  size_t bytes = 0, tokens = 0;
  for (auto _ : state) {
    for (const std::string& d : docs) {
      auto enc = tok->Encode(d, false);
      bytes += d.size();
      tokens += enc.ok() ? enc->ids.size() : 0;
      benchmark::DoNotOptimize(enc);
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void BM_Decode(benchmark::State& state, const std::string& name) {
  const inferd::Tokenizer* tok = Load(name);
  if (tok == nullptr) {
    state.SkipWithError("tokenizer not found under shared/");
    return;
  }
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& d : Documents()) ids.push_back(tok->Encode(d, false)->ids);
  size_t tokens = 0;
  for (auto _ : state) {
    for (const auto& v : ids) {
      auto text = tok->Decode(v, false);
      tokens += v.size();
      benchmark::DoNotOptimize(text);
    }
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK_CAPTURE(BM_Encode, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama2, std::string("llama2"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, bert_base_uncased, std::string("bert-base-uncased"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, t5_small, std::string("t5-small"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
