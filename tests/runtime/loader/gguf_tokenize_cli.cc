// inferd_gguf_tokenize_cli: builds inferd's tokenizer from a GGUF file's
// metadata (LoadGgufTokenizer) and encodes/decodes texts with it, for the
// differential test against transformers' GGUF tokenizer conversion.
// Output: first line, the tokenizer_config values as JSON; then one JSON
// object per input line (a JSON string): {"ids": [...], "special": [...],
// "decoded": "..."} ("ids" without special tokens, "special" with them,
// "decoded" the decoding of "ids") or {"error": "..."}.
//
// usage: inferd_gguf_tokenize_cli FILE.gguf [TOKENIZER_JSON_OUT] < texts.jsonl
#include <fstream>
#include <iostream>
#include <string>

#include "nlohmann/json.hpp"
#include "runtime/loader/gguf_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/tokenizer_diff/tokenize_lines.h"

namespace {

nlohmann::json OrNull(const absl::optional<std::string>& s) {
  return s.has_value() ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: " << argv[0]
              << " FILE.gguf [TOKENIZER_JSON_OUT] < texts.jsonl\n";
    return 2;
  }
  auto gguf = inferd::LoadGgufTokenizer(std::string(argv[1]));
  if (!gguf.ok()) {
    std::cerr << gguf.status() << "\n";
    return 1;
  }
  if (argc == 3) std::ofstream(argv[2]) << gguf->tokenizer_json;
  auto tok = inferd::Tokenizer::FromJson(gguf->tokenizer_json);
  if (!tok.ok()) {
    std::cerr << argv[1] << ": " << tok.status() << "\n";
    return 1;
  }
  const inferd::TokenizerConfig& c = gguf->tokenizer_config;
  nlohmann::json config = {
      {"bos_token", OrNull(c.bos_token)},
      {"eos_token", OrNull(c.eos_token)},
      {"unk_token", OrNull(c.unk_token)},
      {"pad_token", OrNull(c.pad_token)},
      {"add_bos_token", c.add_bos_token.value_or(false)},
      {"add_eos_token", c.add_eos_token.value_or(false)},
      {"chat_template", c.chat_template},
      {"eos_token_ids", gguf->eos_token_ids}};
  std::cout << config.dump(-1, ' ', false,
                           nlohmann::json::error_handler_t::replace)
            << "\n";
  return inferd::TokenizeLines(**tok);
}
