// inferd_schema_check: the structured-output engine (ConstraintCompiler, the
// TokenConstraint a request gets) on a corpus of JSON Schemas with test
// instances, token by token over a real tokenizer's vocabulary, the way
// MaskBench measures llguidance. Used by bench/structured/maskbench.py (the
// whole corpus) and tests/runtime/gen/schema_corpus_test.py (CI).
//
// usage: inferd_schema_check --gguf FILE | --tokenizer tokenizer.json
//        < cases.jsonl > results.jsonl
// Each input line: {"id": ..., "schema": <schema>, "tests": [{"data":
// <instance>, "valid": bool}, ...]}. Each instance is written as compact
// JSON in its own key order (the engine writes properties in the schema's
// order: reorder instances first) under flexible whitespace, then fed
// through the constraint: at each step the longest token the mask allows
// that continues the text. Accepted = the whole text was written and the
// output may end there. Each output line: {"id", "compiled", "error",
// "compile_ms", "accepted": [bool per test]}. An input "walk" adds an output
// written under the masks from random logits (see below).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/gen/sampler.h"
#include "runtime/gen/structured_output.h"
#include "runtime/loader/gguf_tokenizer.h"
#include "runtime/tokenizer/token_bytes.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

using Json = nlohmann::ordered_json;

struct Vocabulary {
  std::unique_ptr<inferd::Tokenizer> tokenizer;
  std::vector<std::string> bytes;  // + one EOS row
  int32_t eos = 0;
  // Token ids by first byte, longest first.
  std::vector<std::vector<int32_t>> by_first_byte;
};

// Writes `text` under the constraint; true when all of it is accepted and
// the output may end after it.
bool Accepts(const Vocabulary& v, inferd::TokenConstraint* c,
             const std::string& text) {
  std::vector<float> logits(v.bytes.size());
  const int32_t ends[] = {v.eos};
  size_t pos = 0;
  while (pos < text.size()) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    c->Mask(absl::MakeSpan(logits), ends);
    int32_t pick = -1;
    for (int32_t id : v.by_first_byte[static_cast<uint8_t>(text[pos])]) {
      const std::string& t = v.bytes[id];
      if (!std::isinf(logits[id]) && text.compare(pos, t.size(), t) == 0) {
        pick = id;  // the longest, as the list is longest first
        break;
      }
    }
    if (pick < 0) return false;
    c->Advance(pick);
    pos += v.bytes[pick].size();
  }
  std::fill(logits.begin(), logits.end(), 0.0f);
  c->Mask(absl::MakeSpan(logits), ends);
  return !std::isinf(logits[v.eos]) || c->Complete();
}

}  // namespace

int main(int argc, char** argv) {
  std::string gguf, tokenizer_json;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--gguf") gguf = argv[i + 1];
    else if (flag == "--tokenizer") tokenizer_json = argv[i + 1];
  }
  if (gguf.empty() == tokenizer_json.empty()) {
    std::cerr << "usage: inferd_schema_check --gguf FILE | --tokenizer "
                 "tokenizer.json < cases.jsonl > results.jsonl\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<inferd::Tokenizer>> tok;
  if (!gguf.empty()) {
    auto g = inferd::LoadGgufTokenizer(gguf);
    if (!g.ok()) {
      std::cerr << g.status() << "\n";
      return 1;
    }
    tok = inferd::Tokenizer::FromJson(g->tokenizer_json);
  } else {
    tok = inferd::Tokenizer::FromFile(tokenizer_json);
  }
  if (!tok.ok()) {
    std::cerr << tok.status() << "\n";
    return 1;
  }
  Vocabulary v;
  v.tokenizer = *std::move(tok);
  v.bytes = inferd::TokenByteStrings(*v.tokenizer);
  v.bytes.push_back("");  // EOS, an id past the tokenizer's
  v.eos = static_cast<int32_t>(v.bytes.size()) - 1;
  v.by_first_byte.resize(256);
  for (size_t id = 0; id < v.bytes.size(); ++id) {
    if (v.bytes[id].empty()) continue;
    v.by_first_byte[static_cast<uint8_t>(v.bytes[id][0])].push_back(
        static_cast<int32_t>(id));
  }
  for (auto& ids : v.by_first_byte) {
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return v.bytes[a].size() > v.bytes[b].size();
    });
  }
  const inferd::Tokenizer* t = v.tokenizer.get();
  // Masks inline (no worker thread), a cache of one: each schema once.
  inferd::ConstraintCompiler compiler(
      [&v, t] {
        inferd::ConstraintVocabulary cv;
        cv.token_bytes = v.bytes;
        cv.eos_ids = {v.eos};
        cv.tokenize = [t](absl::string_view text) {
          auto e = t->Encode(text, false);
          return e.ok() ? e->ids : std::vector<int32_t>();
        };
        return cv;
      },
      /*threads=*/0, /*max_cached=*/1);

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    Json in = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    Json out;
    if (in.is_discarded() || !in.contains("schema")) {
      out["error"] = "input line is not {\"schema\": ..., \"tests\": [...]}";
      std::cout << out.dump() << "\n";
      continue;
    }
    out["id"] = in.value("id", Json());
    inferd::ResponseFormat format;
    format.type = inferd::ResponseFormat::Type::kJsonSchema;
    format.spec = in["schema"].dump();
    format.flexible_whitespace = true;
    const auto t0 = std::chrono::steady_clock::now();
    auto first = compiler.NewConstraint(format);
    const auto t1 = std::chrono::steady_clock::now();
    out["compile_ms"] =
        std::chrono::duration<double, std::milli>(t1 - t0).count();
    out["compiled"] = first.ok();
    out["error"] = first.ok() ? "" : std::string(first.status().message());
    Json accepted = Json::array();
    if (first.ok() && in.contains("tests") && in["tests"].is_array()) {
      std::unique_ptr<inferd::TokenConstraint> c = *std::move(first);
      for (const Json& test : in["tests"]) {
        if (c == nullptr) {
          auto next = compiler.NewConstraint(format);  // cached: a clone
          if (!next.ok()) break;
          c = *std::move(next);
        }
        accepted.push_back(
            Accepts(v, c.get(), test.value("data", Json()).dump()));
        c.reset();
      }
    }
    out["accepted"] = accepted;
    // "walk": {"seed": S, "max_tokens": N}: an output the engine lets a
    // model write, sampled from random logits under the masks (ending as
    // soon as the output may end); "walk_text", and "walk_done" when it
    // ended within N tokens.
    if (out["compiled"] == true && in.contains("walk")) {
      auto c = compiler.NewConstraint(format);
      if (c.ok()) {
        const Json& w = in["walk"];
        std::mt19937_64 rng(w.value("seed", 1));
        std::normal_distribution<float> normal(0.0f, 2.0f);
        std::vector<float> logits(v.bytes.size());
        const int32_t ends[] = {v.eos};
        std::string text;
        bool done = false;
        for (int i = 0; i < w.value("max_tokens", 400) && !done; ++i) {
          for (float& x : logits) x = normal(rng);
          (*c)->Mask(absl::MakeSpan(logits), ends);
          if (!std::isinf(logits[v.eos])) {
            done = true;
            break;
          }
          const int32_t id = static_cast<int32_t>(
              std::max_element(logits.begin(), logits.end()) -
              logits.begin());
          if (std::isinf(logits[id])) break;  // nothing allowed
          (*c)->Advance(id);
          text += v.bytes[id];
          done = (*c)->Complete();
        }
        out["walk_text"] = text;
        out["walk_done"] = done;
      }
    }
    std::cout << out.dump(-1, ' ', false, Json::error_handler_t::replace)
              << std::endl;
  }
  return 0;
}
