// Encodes every published reference case (llama.cpp's tokenizer vectors,
// produced by the reference libraries) and requires the exact ids.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/runtime/tokenizer/test_util.h"

namespace inferd {
namespace {

using testing_util::Case;

class ReferenceCasesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceCasesTest, EncodesEveryCaseIdForId) {
  const std::string name = GetParam();
  std::vector<Case> cases;
  if (!testing_util::ReadCases(name, &cases)) {
    GTEST_SKIP() << "shared tokenizer cases for " << name << " not found under "
                 << testing_util::SharedDir();
  }
  auto tok = Tokenizer::FromFile(testing_util::TokenizerPath(name));
  ASSERT_TRUE(tok.ok()) << tok.status();
  int passed = 0;
  int excluded = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    // stories260K's ids come from SentencePiece on the original model, its
    // tokenizer.json from a conversion whose normalizer strips "^ | $".
    // inferd compiles that regex as the Hugging Face library does ('^' and
    // '$' also anchor at newlines), so the two disagree on spaces next to a
    // newline; tests/tokenizer_diff checks this file against HF itself.
    if (name == "stories260K" &&
        (cases[i].text.find(" \n") != std::string::npos ||
         cases[i].text.find("\n ") != std::string::npos)) {
      ++excluded;
      continue;
    }
    auto enc = (*tok)->Encode(cases[i].text, /*add_special_tokens=*/false);
    ASSERT_TRUE(enc.ok()) << enc.status();
    if (enc->ids == cases[i].ids) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " case " << i << " text=[" << cases[i].text
                    << "]\n  want: " << absl::StrJoin(cases[i].ids, " ")
                    << "\n  got:  " << absl::StrJoin(enc->ids, " ");
    }
  }
  std::cout << "[ cases    ] " << name << ": " << passed << "/"
            << cases.size() - excluded << " passed (" << excluded
            << " excluded)\n";
  EXPECT_EQ(passed, static_cast<int>(cases.size()) - excluded);
  EXPECT_LE(excluded, 4);
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, ReferenceCasesTest,
                         ::testing::Values("llama2", "llama3", "qwen3",
                                           "roberta-base", "bert-base-uncased",
                                           "stories260K"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace inferd
