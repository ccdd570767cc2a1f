// TokenByteStrings against the tokenizer's own decoding: for texts with
// multi-byte characters (which byte-level and byte-fallback vocabularies
// spell with partial-character tokens), the bytes of a text's tokens put
// together are the text the tokenizer decodes after a leading word.
#include "runtime/tokenizer/token_bytes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/shared_data.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {
namespace {

const char* const kTexts[] = {
    "hello world", "  two  spaces", "{\"name\": \"Zoë\", \"age\": 42}",
    "日本語のテキスト", "emoji 😀🎉 end", "tabs\tand\nnewlines\n\n",
    "naïve café – “quotes”", "Ωμέγα and ñandú"};

void CheckTokenizer(const std::string& path) {
  auto tok = Tokenizer::FromFile(path);
  ASSERT_TRUE(tok.ok()) << path << ": " << tok.status();
  const std::vector<std::string> bytes = TokenByteStrings(**tok);
  ASSERT_EQ(bytes.size(), (*tok)->vocab_size());
  int special_empty = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(bytes.size()); ++id) {
    if ((*tok)->IsSpecial(id)) {
      EXPECT_TRUE(bytes[id].empty()) << id;
      ++special_empty;
    }
  }
  auto lead = (*tok)->Encode("Start", /*add_special_tokens=*/false);
  ASSERT_TRUE(lead.ok());
  for (const char* text : kTexts) {
    auto enc = (*tok)->Encode(std::string(" ") + text, false);
    ASSERT_TRUE(enc.ok()) << text;
    std::string joined;
    for (int32_t id : enc->ids) {
      // Unknown-token ids have no faithful bytes; these texts avoid them.
      joined += bytes[id];
    }
    std::vector<int32_t> all = lead->ids;
    all.insert(all.end(), enc->ids.begin(), enc->ids.end());
    auto full = (*tok)->Decode(all, false);
    auto head = (*tok)->Decode(lead->ids, false);
    ASSERT_TRUE(full.ok() && head.ok());
    EXPECT_EQ(*head + joined, *full) << path << ": " << text;
  }
}

TEST(TokenBytesTest, ByteLevelBpe) {
  INFERD_REQUIRE_SHARED(path, "tokenizers/qwen3/tokenizer.json");
  CheckTokenizer(path);
}

TEST(TokenBytesTest, Llama3ByteLevel) {
  INFERD_REQUIRE_SHARED(path, "tokenizers/llama3/tokenizer.json");
  CheckTokenizer(path);
}

TEST(TokenBytesTest, SentencePieceWithByteFallback) {
  INFERD_REQUIRE_SHARED(path, "tokenizers/llama2/tokenizer.json");
  CheckTokenizer(path);
}

TEST(TokenBytesTest, Stories260K) {
  CheckTokenizer(std::string(INFERD_SOURCE_DIR) +
                 "/examples/models/stories260K/tokenizer.json");
}

}  // namespace
}  // namespace inferd
