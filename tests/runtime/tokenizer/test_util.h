// Helpers shared by the tokenizer tests: locating /work/shared material and
// reading llama.cpp-style .inp/.out case files. Not thread-safe.
#ifndef INFERD_TESTS_RUNTIME_TOKENIZER_TEST_UTIL_H_
#define INFERD_TESTS_RUNTIME_TOKENIZER_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/shared_data.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace inferd {
namespace testing_util {


inline bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// Path of NAME's tokenizer.json under shared/ (stories260K lives with its
// model).
inline std::string TokenizerPath(const std::string& name) {
  if (name == "stories260K") {
    return std::string(INFERD_SOURCE_DIR) +
           "/examples/models/stories260K/tokenizer.json";
  }
  return SharedDir() + "/tokenizers/" + name + "/tokenizer.json";
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// Texts are separated by "\n__ggml_vocab_test__\n" (the file ends with one);
// line k of NAME.out holds the ids of text k.
inline bool ReadCases(const std::string& name, std::vector<Case>* cases) {
  std::string inp, out;
  const std::string dir = SharedDir() + "/tokenizers/cases/";
  if (!ReadFile(dir + name + ".inp", &inp) ||
      !ReadFile(dir + name + ".out", &out)) {
    return false;
  }
  std::vector<std::string> texts =
      absl::StrSplit(inp, "\n__ggml_vocab_test__\n");
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  if (!texts.empty() && texts.back().empty()) texts.pop_back();
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (texts.size() != lines.size()) return false;
  for (size_t i = 0; i < texts.size(); ++i) {
    Case c;
    c.text = texts[i];
    for (absl::string_view tok :
         absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
      int32_t id;
      if (!absl::SimpleAtoi(tok, &id)) return false;
      c.ids.push_back(id);
    }
    cases->push_back(std::move(c));
  }
  return true;
}

}  // namespace testing_util
}  // namespace inferd

#endif  // INFERD_TESTS_RUNTIME_TOKENIZER_TEST_UTIL_H_
