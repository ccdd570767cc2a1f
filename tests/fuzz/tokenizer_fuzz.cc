// libFuzzer target for the tokenizer: (a) loads a tokenizer.json from the
// input bytes and, when that succeeds, encodes/decodes a fixed text with it;
// (b) encodes the input bytes with a fixed tokenizer (the file named by
// INFERD_FUZZ_TOKENIZER, else a small inline one) and decodes the ids.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "runtime/tokenizer/incremental_decoder.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

constexpr char kInlineTokenizer[] = R"({
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true,
                    "normalized": false},
                   {"id": 1, "content": "<s>", "special": true,
                    "normalized": false, "lstrip": true, "rstrip": true}],
  "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "NFKC"},
      {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
      {"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\p{N}|\\p{L}+"},
                    "behavior": "Isolated", "invert": false},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true,
            "byte_fallback": true,
            "vocab": {"<unk>": 0, "<s>": 1, "<0x41>": 2, "\u2581": 3, "a": 4,
                      "b": 5, "ab": 6, "\u2581ab": 7},
            "merges": ["a b", "\u2581 ab"]},
  "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [{"Sequence": {"id": "A", "type_id": 0}},
               {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
})";

const inferd::Tokenizer& FixedTokenizer() {
  static const inferd::Tokenizer* tok = [] {
    const char* path = std::getenv("INFERD_FUZZ_TOKENIZER");
    if (path != nullptr) {
      auto t = inferd::Tokenizer::FromFile(path);
      if (t.ok()) return t->release();
    }
    auto t = inferd::Tokenizer::FromJson(kInlineTokenizer);
    if (!t.ok()) std::abort();
    return t->release();
  }();
  return *tok;
}

void Exercise(const inferd::Tokenizer& tok, const std::string& text) {
  auto enc = tok.Encode(text, true);
  if (!enc.ok()) return;
  auto decoded = tok.Decode(enc->ids, false);
  if (!decoded.ok()) std::abort();  // Ids from Encode must decode.
  inferd::IncrementalDecoder stream(tok, true);
  for (int32_t id : enc->ids) stream.Push(id);
  stream.Flush();
  inferd::TruncationParams t;
  t.max_length = 4;
  (void)tok.EncodePair(text, text, true, t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  auto loaded = inferd::Tokenizer::FromJson(input);
  if (loaded.ok()) Exercise(**loaded, "Hello world 123 <s> \xC3\xA9");
  Exercise(FixedTokenizer(), input);
  return 0;
}
