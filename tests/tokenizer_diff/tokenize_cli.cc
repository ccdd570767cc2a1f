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
  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::json out;
    std::string text;
    try {
      text = nlohmann::json::parse(line).get<std::string>();
    } catch (const std::exception& e) {
      std::cerr << "bad input line: " << e.what() << "\n";
      return 1;
    }
    auto plain = (*tok)->Encode(text, /*add_special_tokens=*/false);
    auto special = (*tok)->Encode(text, /*add_special_tokens=*/true);
    if (!plain.ok() || !special.ok()) {
      out["error"] = std::string(
          (!plain.ok() ? plain.status() : special.status()).message());
    } else {
      out["ids"] = plain->ids;
      out["special"] = special->ids;
      auto decoded = (*tok)->Decode(plain->ids, /*skip_special_tokens=*/false);
      if (decoded.ok()) {
        out["decoded"] = *decoded;
      } else {
        out["decode_error"] = std::string(decoded.status().message());
      }
    }
    // Invalid UTF-8 in a decoded string is replaced, not thrown on.
    std::cout << out.dump(-1, ' ', false,
                          nlohmann::json::error_handler_t::replace)
              << "\n";
  }
  return 0;
}
