// inferd_tokenize_cli: encodes (and decodes) texts with inferd's tokenizer
// for the differential test against the Hugging Face `tokenizers` library.
// Input: one JSON string per line (a text). Output: one JSON object per line,
// {"ids": [...], "special": [...], "decoded": "..."} where "ids" is the
// encoding without special tokens, "special" with them, and "decoded" the
// decoding of "ids" (special tokens kept); or {"error": "..."}.
//
// usage: inferd_tokenize_cli TOKENIZER_JSON < texts.jsonl > ids.jsonl
#include <iostream>
#include <string>

#include "nlohmann/json.hpp"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/tokenizer_diff/tokenize_lines.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " TOKENIZER_JSON < texts.jsonl\n";
    return 2;
  }
  auto tok = inferd::Tokenizer::FromFile(argv[1]);
  if (!tok.ok()) {
    std::cerr << argv[1] << ": " << tok.status() << "\n";
    return 1;
  }
  return inferd::TokenizeLines(**tok);
}
