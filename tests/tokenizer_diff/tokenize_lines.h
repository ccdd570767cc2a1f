// The JSON-lines protocol of the tokenizer differential tests' CLIs: each
// stdin line is a JSON string; each stdout line is {"ids", "special",
// "decoded"} (or "error" / "decode_error") for it. Shared by
// tokenize_cli.cc (tokenizer.json files) and the GGUF one.
#ifndef INFERD_TESTS_TOKENIZER_DIFF_TOKENIZE_LINES_H_
#define INFERD_TESTS_TOKENIZER_DIFF_TOKENIZE_LINES_H_

#include <exception>
#include <iostream>
#include <string>

#include "nlohmann/json.hpp"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {

// Answers every line of stdin; 1 on a line that is not a JSON string.
inline int TokenizeLines(const Tokenizer& tok) {
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
    auto plain = tok.Encode(text, /*add_special_tokens=*/false);
    auto special = tok.Encode(text, /*add_special_tokens=*/true);
    if (!plain.ok() || !special.ok()) {
      out["error"] = std::string(
          (!plain.ok() ? plain.status() : special.status()).message());
    } else {
      out["ids"] = plain->ids;
      out["special"] = special->ids;
      auto decoded = tok.Decode(plain->ids, /*skip_special_tokens=*/false);
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

}  // namespace inferd

#endif  // INFERD_TESTS_TOKENIZER_DIFF_TOKENIZE_LINES_H_
