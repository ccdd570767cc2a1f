// libFuzzer target for the tokenizer: (a) loads a tokenizer.json from the
// input bytes (inputs up to kMaxJsonBytes) and, when that succeeds,
// encodes/decodes a fixed text with it; (b) encodes the input bytes with a
// fixed tokenizer (the file named by INFERD_FUZZ_TOKENIZER, else a small
// inline one), loaded once per process, and decodes the ids. The pair and
// truncation path and the streaming decoder see a prefix of the input /
// ids: they would double the cost per input and need no more to be
// exercised.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "runtime/tokenizer/incremental_decoder.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

// Larger inputs are not tried as tokenizer.json: a useful one is small, and
// parsing large ones would only slow down the encoder fuzzing.
constexpr size_t kMaxJsonBytes = 4096;
// Bytes of the input given to the pair/truncation path.
constexpr size_t kMaxPairBytes = 256;
// Ids streamed through the IncrementalDecoder (two decodes per id; its state
// is a few ids wide, so a long stream finds nothing a short one does not).
constexpr size_t kMaxStreamIds = 256;

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

void Exercise(const inferd::Tokenizer& tok, const std::string& text,
              bool fixed) {
  auto enc = tok.Encode(text, true);
  if (!enc.ok()) return;
  auto decoded = tok.Decode(enc->ids, false);
  if (!decoded.ok()) std::abort();  // Ids from Encode must decode.
  inferd::IncrementalDecoder stream(tok, true);
  const size_t streamed = std::min(enc->ids.size(), kMaxStreamIds);
  for (size_t i = 0; i < streamed; ++i) stream.Push(enc->ids[i]);
  stream.Flush();
  inferd::TruncationParams t;
  t.max_length = 4;
  size_t cut = std::min(text.size(), kMaxPairBytes);
  while (cut > 0 && cut < text.size() &&
         (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;  // Keep valid UTF-8 valid.
  }
  const std::string prefix = text.substr(0, cut);
  auto pair = tok.EncodePair(prefix, prefix, true, t);
  // The fixed tokenizer's template adds no pair specials: truncation alone
  // must bring the pair down to max_length.
  if (fixed && pair.ok() && pair->size() > t.max_length) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (size <= kMaxJsonBytes) {
    auto loaded = inferd::Tokenizer::FromJson(input);
    if (loaded.ok()) Exercise(**loaded, "Hello world 123 <s> \xC3\xA9", false);
  }
  Exercise(FixedTokenizer(), input, true);
  return 0;
}
