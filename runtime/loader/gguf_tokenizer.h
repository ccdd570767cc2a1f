// GGUF tokenizer: turns a GGUF file's `tokenizer.ggml.*` metadata into the
// equivalent Hugging Face tokenizer.json (for inferd's Tokenizer) plus the
// tokenizer_config values (special tokens, BOS/EOS insertion, chat template).
// Pure functions of their input; thread-safe.
//
// Supported tokenizer.ggml.model values:
//   gpt2   byte-level BPE; vocabulary from tokens, merges from
//          tokenizer.ggml.merges, pre-tokenizer chosen by tokenizer.ggml.pre
//          as llama.cpp does (see kGgufBpePreTypes in the .cc).
//   llama  SentencePiece BPE, built as transformers' LlamaTokenizer does: BPE
//          with byte_fallback, merges derived from the vocabulary ordered by
//          score, Metaspace (prefix space unless add_space_prefix is false).
//   bert   WordPiece (BERT normalizer, lowercasing as llama.cpp's WPM
//          tokenizer does; BERT pre-tokenizer), vocabulary respelt from
//          llama.cpp's form ("\u2581x" -> "x", "x" -> "##x", control tokens
//          verbatim); post-processor [CLS] A [SEP] with CLS = cls id or BOS,
//          SEP = separator id or EOS.
// Others (t5, rwkv, ...) are INVALID_ARGUMENT naming the model.
// Token types (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
// 6 byte) decide the added tokens: control -> special, user-defined -> plain.
#ifndef INFERD_RUNTIME_LOADER_GGUF_TOKENIZER_H_
#define INFERD_RUNTIME_LOADER_GGUF_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/loader/gguf.h"
#include "runtime/loader/tokenizer_config.h"

namespace inferd {

struct GgufTokenizer {
  // A Hugging Face tokenizer.json equivalent (for Tokenizer::FromJson).
  std::string tokenizer_json;
  // present=true; bos/eos/pad/unk token strings, resolved add_bos/add_eos,
  // chat_template (tokenizer.chat_template) and named templates
  // (tokenizer.chat_template.<name>).
  TokenizerConfig tokenizer_config;
  // Generation stops on any: eos, then eot and eom when the file has them.
  std::vector<int64_t> eos_token_ids;
};

// INVALID_ARGUMENT naming the metadata key for malformed or unsupported
// tokenizer metadata (including an unknown tokenizer.ggml.pre, listing the
// supported ones); NOT_FOUND when the file has no tokenizer.ggml.model.
absl::StatusOr<GgufTokenizer> LoadGgufTokenizer(const GgufFile& file);
// Opens `path` (GgufFile::Open) and converts its tokenizer.
absl::StatusOr<GgufTokenizer> LoadGgufTokenizer(const std::string& path);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_GGUF_TOKENIZER_H_
