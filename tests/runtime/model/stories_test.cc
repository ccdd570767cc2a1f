// The real pretrained stories260K Llama (shipped in examples/models) decoded
// greedily through the paged KV cache must reproduce the continuation
// documented in its README.md (encoded and decoded with inferd's tokenizer) and the
// reference implementation's ids.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "runtime/model/model_runner.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/runtime/model/model_test_util.h"

namespace inferd {
namespace {

const std::string kModelDir =
    absl::StrCat(INFERD_SOURCE_DIR, "/examples/models/stories260K");

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Collapses whitespace runs to one space and trims.
std::string Squash(absl::string_view text) {
  std::vector<absl::string_view> words =
      absl::StrSplit(text, absl::ByAnyChar(" \n\t"), absl::SkipEmpty());
  return absl::StrJoin(words, " ");
}

// The README's expected continuation: the indented block after "continues".
std::string ExpectedText() {
  const std::string readme =
      ReadFile(absl::StrCat(INFERD_SOURCE_DIR, "/examples/models/stories260K/README.md"));
  std::string out;
  bool in_block = false;
  for (absl::string_view line : absl::StrSplit(readme, '\n')) {
    if (absl::StartsWith(line, "    ") &&
        !absl::StripAsciiWhitespace(line).empty()) {
      in_block = true;
      absl::StrAppend(&out, line, " ");
    } else if (in_block) {
      break;
    }
  }
  return Squash(out);
}

TEST(Stories260KTest, GreedyDecodingReproducesTheDocumentedStory) {
  if (!std::ifstream(kModelDir + "/model.safetensors").good()) {
    GTEST_SKIP() << "shared model " << kModelDir << " is not available";
  }
  ModelRunnerOptions options;
  options.model_dir = kModelDir;
  auto runner = CreateModelRunner(options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  constexpr int kBlockSize = 16;
  ASSERT_TRUE((*runner)->AllocateKvCache(16, kBlockSize).ok());

  auto tokenizer =
      Tokenizer::FromFile(absl::StrCat(kModelDir, "/tokenizer.json"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto decode = [&](const std::vector<int32_t>& ids) {
    auto text = (*tokenizer)->Decode(ids, /*skip_special_tokens=*/true);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? Squash(*text) : std::string();
  };
  // BOS + "Once upon a time" (the template post-processor adds <s>).
  auto encoding = (*tokenizer)->Encode("Once upon a time", true);
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  const std::vector<int32_t> prompt = encoding->ids;
  ASSERT_EQ(prompt, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  const std::string expected = ExpectedText();
  ASSERT_TRUE(absl::StartsWith(expected, "Once upon a time")) << expected;

  std::vector<int32_t> seq = prompt;
  std::vector<int32_t> generated;
  std::vector<int32_t> table;
  for (int step = 0; step < 120; ++step) {
    while (static_cast<int64_t>(table.size()) * kBlockSize <
           static_cast<int64_t>(seq.size())) {
      table.push_back(static_cast<int32_t>(table.size()));
    }
    BatchPlan plan;
    SequencePlan s;
    s.token_ids = step == 0 ? seq : std::vector<int32_t>{seq.back()};
    s.start_pos = step == 0 ? 0 : static_cast<int32_t>(seq.size() - 1);
    s.block_table = table;
    s.output = StepOutput::kLastLogits;
    plan.seqs.push_back(s);
    auto result = (*runner)->Execute(plan);
    ASSERT_TRUE(result.ok()) << result.status();
    const std::vector<float>& logits = result->seqs[0].values;
    const int32_t next = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    seq.push_back(next);
    generated.push_back(next);
    if (decode(seq).size() >= expected.size() || next == 2) break;
  }
  const std::string text = decode(seq);
  EXPECT_EQ(text.substr(0, expected.size()), expected);

  // Same ids as the independent implementation.
  auto ref = testing_util::RunReference(
      kModelDir, prompt,
      absl::StrCat("--logits none --greedy ", generated.size()));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(generated, (*ref)["greedy"].get<std::vector<int32_t>>());
}

}  // namespace
}  // namespace inferd
