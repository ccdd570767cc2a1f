// libFuzzer target: structured output on llguidance
// (runtime/gen/structured_output.h). The first input byte picks the format
// (j: JSON Schema, r: regex, g: Lark grammar, c: choices, one per line),
// the rest is its text. The compiler must answer any text with a
// constraint or INVALID_ARGUMENT and a message, never crash, within
// llguidance's limits; a constraint is then walked for up to 64 tokens of
// a byte vocabulary, each picked among the allowed ones by the input's
// hash, and every picked token must be accepted.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "runtime/gen/structured_output.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// 256 single-byte tokens, a few longer ones, then EOS.
inferd::ConstraintVocabulary Vocab() {
  inferd::ConstraintVocabulary v;
  for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, char(b)));
  for (const char* t : {"\": ", "\", \"", "{\"", "\"}", "true", "null", "12"}) {
    v.token_bytes.push_back(t);
  }
  v.token_bytes.push_back("");  // EOS
  v.eos_ids = {static_cast<int32_t>(v.token_bytes.size()) - 1};
  return v;
}

inferd::ConstraintCompiler& Compiler() {
  // Masks inline: one thread per fuzzing process.
  static auto* c = new inferd::ConstraintCompiler(Vocab, /*threads=*/0,
                                                  /*max_cached=*/4);
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 16384) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  inferd::ResponseFormat f;
  switch (data[0]) {
    case 'j': f.type = inferd::ResponseFormat::Type::kJsonSchema; break;
    case 'r': f.type = inferd::ResponseFormat::Type::kRegex; break;
    case 'g': f.type = inferd::ResponseFormat::Type::kGrammar; break;
    case 'c': f.type = inferd::ResponseFormat::Type::kChoice; break;
    default: return 0;
  }
  if (f.type == inferd::ResponseFormat::Type::kChoice) {
    for (absl::string_view c : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      f.choices.emplace_back(c);
    }
    if (f.choices.empty()) return 0;
  } else {
    f.spec = std::string(text);
  }
  f.strict = (size & 1) != 0;
  f.flexible_whitespace = (size & 2) != 0;
  auto constraint = Compiler().NewConstraint(f);
  if (!constraint.ok()) {
    Check(constraint.status().code() == absl::StatusCode::kInvalidArgument);
    Check(!constraint.status().message().empty());
    return 0;
  }
  const int32_t n = static_cast<int32_t>(Vocab().token_bytes.size());
  const int32_t eos = n - 1;
  const int32_t ends[] = {eos};
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ULL;
  std::vector<float> logits(n);
  for (int step = 0; step < 64 && !(*constraint)->Complete(); ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    (*constraint)->Mask(absl::MakeSpan(logits), ends);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < n; ++id) {
      if (!std::isinf(logits[id])) allowed.push_back(id);
    }
    if (allowed.empty()) break;  // a format nothing satisfies
    h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    const int32_t pick = allowed[(h >> 33) % allowed.size()];
    if (pick == eos) break;
    (*constraint)->Advance(pick);
  }
  return 0;
}
