// LoadGgufTokenizer on GGUF files built in memory: tiny gpt2 and llama
// (SentencePiece) vocabularies encode as expected, and malformed tokenizer
// metadata is INVALID_ARGUMENT naming the key.
#include "runtime/loader/gguf_tokenizer.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/loader/gguf.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// GGUF v3 bytes: metadata only, no tensors. Setting a key again replaces
// its value (GgufFile rejects duplicate keys).
class GgufBytes {
 public:
  GgufBytes& Str(const std::string& key, const std::string& v) {
    std::string out = Type(GgufValueType::kString);
    String(&out, v);
    return Set(key, out);
  }
  GgufBytes& U32(const std::string& key, uint32_t v) {
    return Set(key, Type(GgufValueType::kUint32) + Raw(v));
  }
  GgufBytes& Bool(const std::string& key, bool v) {
    return Set(key, Type(GgufValueType::kBool) + Raw<uint8_t>(v ? 1 : 0));
  }
  GgufBytes& Strs(const std::string& key, const std::vector<std::string>& v) {
    std::string out = ArrayHeader(GgufValueType::kString, v.size());
    for (const std::string& s : v) String(&out, s);
    return Set(key, out);
  }
  GgufBytes& I32s(const std::string& key, const std::vector<int32_t>& v) {
    std::string out = ArrayHeader(GgufValueType::kInt32, v.size());
    for (int32_t x : v) out += Raw(x);
    return Set(key, out);
  }
  GgufBytes& F32s(const std::string& key, const std::vector<float>& v) {
    std::string out = ArrayHeader(GgufValueType::kFloat32, v.size());
    for (float x : v) out += Raw(x);
    return Set(key, out);
  }
  std::string Build() const {
    std::string out = "GGUF" + Raw(uint32_t{3}) + Raw(uint64_t{0}) +
                      Raw(static_cast<uint64_t>(kvs_.size()));
    for (const auto& kv : kvs_) {
      String(&out, kv.first);
      out += kv.second;
    }
    return out;
  }

 private:
  template <typename T>
  static std::string Raw(T v) {
    return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  static std::string Type(GgufValueType t) {
    return Raw(static_cast<uint32_t>(t));
  }
  static void String(std::string* out, const std::string& s) {
    *out += Raw<uint64_t>(s.size());
    *out += s;
  }
  static std::string ArrayHeader(GgufValueType t, size_t n) {
    return Type(GgufValueType::kArray) + Type(t) + Raw<uint64_t>(n);
  }
  GgufBytes& Set(const std::string& key, const std::string& value) {
    for (auto& kv : kvs_) {
      if (kv.first == key) {
        kv.second = value;
        return *this;
      }
    }
    kvs_.emplace_back(key, value);
    return *this;
  }
  std::vector<std::pair<std::string, std::string>> kvs_;
};

// "Ġ" is the byte-level spelling of a space.
const std::vector<std::string> kGpt2Tokens = {"a", "b", "\xc4\xa0", "ab",
                                              "\xc4\xa0" "ab", "<|end|>",
                                              "<x>"};

GgufBytes Gpt2File() {
  GgufBytes b;
  b.Str("general.architecture", "llama")
      .Str("tokenizer.ggml.model", "gpt2")
      .Str("tokenizer.ggml.pre", "gpt-2")
      .Strs("tokenizer.ggml.tokens", kGpt2Tokens)
      .I32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 3, 4})
      .Strs("tokenizer.ggml.merges", {"a b", "\xc4\xa0 ab"})
      .U32("tokenizer.ggml.bos_token_id", 5)
      .U32("tokenizer.ggml.eos_token_id", 5)
      .U32("tokenizer.ggml.eot_token_id", 6)
      .Str("tokenizer.chat_template", "{{ x }}");
  return b;
}

// <unk>, <s>, </s>, the byte "!" and a few pieces; "▁hi" is the best merge.
const std::vector<std::string> kSpmTokens = {
    "<unk>", "<s>", "</s>", "<0x21>", "\xe2\x96\x81", "h", "i",
    "\xe2\x96\x81h", "\xe2\x96\x81hi"};

GgufBytes SpmFile() {
  GgufBytes b;
  b.Str("general.architecture", "llama")
      .Str("tokenizer.ggml.model", "llama")
      .Strs("tokenizer.ggml.tokens", kSpmTokens)
      .F32s("tokenizer.ggml.scores", {0, 0, 0, 0, -5, -6, -7, -2, -1})
      .I32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 1, 1, 1, 1, 1})
      .U32("tokenizer.ggml.bos_token_id", 1)
      .U32("tokenizer.ggml.eos_token_id", 2)
      .U32("tokenizer.ggml.unknown_token_id", 0);
  return b;
}

absl::StatusOr<GgufTokenizer> Load(const GgufBytes& b) {
  auto file = GgufFile::FromBuffer(b.Build(), "t.gguf");
  if (!file.ok()) return file.status();
  return LoadGgufTokenizer(**file);
}

std::vector<int32_t> Ids(const Tokenizer& tok, const std::string& text,
                         bool special) {
  auto enc = tok.Encode(text, special);
  EXPECT_TRUE(enc.ok()) << enc.status();
  return enc.ok() ? enc->ids : std::vector<int32_t>{};
}

TEST(GgufTokenizerTest, Gpt2VocabularyEncodesWithMergesAndAddedTokens) {
  auto g = Load(Gpt2File());
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer::FromJson(g->tokenizer_json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(Ids(**tok, "ab ab", false), ElementsAre(3, 4));
  EXPECT_THAT(Ids(**tok, "ab<|end|>a<x>", false), ElementsAre(3, 5, 0, 6));
  // add_bos_token absent: gpt-2 does not add BOS.
  EXPECT_THAT(Ids(**tok, "ab", true), ElementsAre(3));
  EXPECT_TRUE((*tok)->IsSpecial(5));
  EXPECT_FALSE((*tok)->IsSpecial(6));  // user-defined: added, not special
  auto text = (*tok)->Decode({3, 4}, false);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "ab ab");

  const TokenizerConfig& c = g->tokenizer_config;
  EXPECT_TRUE(c.present);
  EXPECT_EQ(c.bos_token.value_or(""), "<|end|>");
  EXPECT_EQ(c.eos_token.value_or(""), "<|end|>");
  EXPECT_FALSE(c.unk_token.has_value());
  EXPECT_EQ(c.add_bos_token, absl::optional<bool>(false));
  EXPECT_EQ(c.chat_template, "{{ x }}");
  EXPECT_THAT(g->eos_token_ids, ElementsAre(5, 6));
}

TEST(GgufTokenizerTest, Gpt2AddBosAndEosFromMetadata) {
  GgufBytes b = Gpt2File();
  b.Bool("tokenizer.ggml.add_bos_token", true)
      .Bool("tokenizer.ggml.add_eos_token", true);
  auto g = Load(b);
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer::FromJson(g->tokenizer_json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(Ids(**tok, "ab", true), ElementsAre(5, 3, 5));
}

TEST(GgufTokenizerTest, LlamaBpePreTypeSplitsDigitsInThrees) {
  GgufBytes b;
  b.Str("tokenizer.ggml.model", "gpt2")
      .Str("tokenizer.ggml.pre", "llama-bpe")
      .Strs("tokenizer.ggml.tokens", {"1", "2", "12", "<s>"})
      .I32s("tokenizer.ggml.token_type", {1, 1, 1, 3})
      .Strs("tokenizer.ggml.merges", {"1 2"})
      .U32("tokenizer.ggml.bos_token_id", 3);
  auto g = Load(b);
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer::FromJson(g->tokenizer_json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "1212" splits as "121" "2"; llama-bpe adds BOS by default.
  EXPECT_THAT(Ids(**tok, "1212", true), ElementsAre(3, 2, 0, 1));
}

TEST(GgufTokenizerTest, SpmVocabularyMergesByScoreAndFallsBackToBytes) {
  auto g = Load(SpmFile());
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer::FromJson(g->tokenizer_json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // Prefix space, "▁hi" by the best merges, "!" as a byte; BOS by default.
  EXPECT_THAT(Ids(**tok, "hi!", true), ElementsAre(1, 8, 3));
  EXPECT_THAT(Ids(**tok, "hi hi", false), ElementsAre(8, 8));
  EXPECT_THAT(Ids(**tok, "ih", false), ElementsAre(4, 6, 5));
  auto text = (*tok)->Decode({8, 3, 8}, false);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hi! hi");
  EXPECT_EQ(g->tokenizer_config.add_bos_token, absl::optional<bool>(true));
  EXPECT_EQ(g->tokenizer_config.unk_token.value_or(""), "<unk>");
  EXPECT_THAT(g->eos_token_ids, ElementsAre(2));
}

TEST(GgufTokenizerTest, SpmWithoutSpacePrefix) {
  GgufBytes b = SpmFile();
  b.Bool("tokenizer.ggml.add_space_prefix", false)
      .Bool("tokenizer.ggml.add_bos_token", false);
  auto g = Load(b);
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer::FromJson(g->tokenizer_json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(Ids(**tok, "hi", true), ElementsAre(5, 6));
}

// llama.cpp's WordPiece spelling: control tokens verbatim, "##lo" as "lo",
// word-initial tokens with a leading "▁".
GgufBytes BertFile() {
  GgufBytes b;
  b.Str("general.architecture", "bert")
      .Str("tokenizer.ggml.model", "bert")
      .Strs("tokenizer.ggml.tokens",
            {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
             "\xe2\x96\x81hello", "\xe2\x96\x81world", "lo",
             "\xe2\x96\x81!", "\xe2\x96\x81lo"})
      .I32s("tokenizer.ggml.token_type", {3, 3, 3, 3, 3, 1, 1, 1, 1, 1})
      .U32("tokenizer.ggml.bos_token_id", 2)
      .U32("tokenizer.ggml.eos_token_id", 3)
      .U32("tokenizer.ggml.seperator_token_id", 3)
      .U32("tokenizer.ggml.unknown_token_id", 1)
      .U32("tokenizer.ggml.padding_token_id", 0)
      .U32("tokenizer.ggml.mask_token_id", 4)
      .Bool("tokenizer.ggml.add_bos_token", true)
      .Bool("tokenizer.ggml.add_eos_token", true)
      .Bool("tokenizer.ggml.add_sep_token", false);
  return b;
}

TEST(GgufTokenizerTest, BertWordPieceUndoesPhantomSpaceSpelling) {
  auto g = Load(BertFile());
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer::FromJson(g->tokenizer_json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // Lowercased; "hellolo" is "hello" + "##lo"; "lo" alone is the word.
  EXPECT_THAT(Ids(**tok, "Hello HELLOLO lo!", false),
              ElementsAre(5, 5, 7, 9, 8));
  // [CLS] ... [SEP]; an unknown word is [UNK]; [MASK] matched whole.
  EXPECT_THAT(Ids(**tok, "world zzz [MASK]", true),
              ElementsAre(2, 6, 1, 4, 3));
  const TokenizerConfig& c = g->tokenizer_config;
  EXPECT_EQ(c.cls_token.value_or(""), "[CLS]");
  EXPECT_EQ(c.sep_token.value_or(""), "[SEP]");
  EXPECT_EQ(c.mask_token.value_or(""), "[MASK]");
  EXPECT_EQ(c.unk_token.value_or(""), "[UNK]");
  EXPECT_EQ(c.pad_token.value_or(""), "[PAD]");
}

TEST(GgufTokenizerTest, BertWithoutSpecialFlagsAddsClsAndSep) {
  // llama.cpp's defaults when the file does not say.
  GgufBytes plain;
  plain.Str("general.architecture", "bert")
      .Str("tokenizer.ggml.model", "bert")
      .Strs("tokenizer.ggml.tokens",
            {"[UNK]", "[CLS]", "[SEP]", "\xe2\x96\x81hi"})
      .I32s("tokenizer.ggml.token_type", {3, 3, 3, 1})
      .U32("tokenizer.ggml.bos_token_id", 1)
      .U32("tokenizer.ggml.eos_token_id", 2);
  auto g = Load(plain);
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer::FromJson(g->tokenizer_json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // No unknown id: the vocabulary's [UNK] stands in.
  EXPECT_THAT(Ids(**tok, "hi ho", true), ElementsAre(1, 3, 0, 2));
}

TEST(GgufTokenizerTest, BertWithoutUnknownTokenIsInvalid) {
  GgufBytes b;
  b.Str("general.architecture", "bert")
      .Str("tokenizer.ggml.model", "bert")
      .Strs("tokenizer.ggml.tokens", {"[CLS]", "\xe2\x96\x81hi"})
      .I32s("tokenizer.ggml.token_type", {3, 1});
  auto g = Load(b);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("tokenizer.ggml.unknown_token_id"));
}

TEST(GgufTokenizerTest, NoTokenizerModelIsNotFound) {
  GgufBytes b;
  b.Str("general.architecture", "llama");
  auto g = Load(b);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
}

struct BadCase {
  const char* name;
  std::function<void(GgufBytes*)> edit;  // applied to a copy of the base
  bool spm;
  const char* key;  // the error names it
};

TEST(GgufTokenizerTest, MalformedMetadataIsInvalidArgumentNamingTheKey) {
  const std::vector<BadCase> cases = {
      {"model not a string",
       [](GgufBytes* b) { b->U32("tokenizer.ggml.model", 1); }, false,
       "tokenizer.ggml.model"},
      {"unknown model",
       [](GgufBytes* b) { b->Str("tokenizer.ggml.model", "rwkv"); }, false,
       "tokenizer.ggml.model"},
      {"unknown pre",
       [](GgufBytes* b) { b->Str("tokenizer.ggml.pre", "no-such-pre"); }, false,
       "no-such-pre"},
      {"tokens not an array",
       [](GgufBytes* b) { b->Str("tokenizer.ggml.tokens", "a"); }, false,
       "tokenizer.ggml.tokens"},
      {"tokens of integers",
       [](GgufBytes* b) { b->I32s("tokenizer.ggml.tokens", {1, 2}); }, false,
       "tokenizer.ggml.tokens"},
      {"empty tokens",
       [](GgufBytes* b) { b->Strs("tokenizer.ggml.tokens", {}); }, false,
       "tokenizer.ggml.tokens"},
      {"token types too short",
       [](GgufBytes* b) { b->I32s("tokenizer.ggml.token_type", {1, 1}); },
       false, "tokenizer.ggml.token_type"},
      {"token type out of range",
       [](GgufBytes* b) {
         b->I32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 9, 1});
       },
       false, "tokenizer.ggml.token_type"},
      {"token types of strings",
       [](GgufBytes* b) {
         b->Strs("tokenizer.ggml.token_type",
                 {"1", "1", "1", "1", "1", "1", "1"});
       },
       false, "tokenizer.ggml.token_type"},
      {"bos out of range",
       [](GgufBytes* b) { b->U32("tokenizer.ggml.bos_token_id", 70); }, false,
       "tokenizer.ggml.bos_token_id"},
      {"eot not an integer",
       [](GgufBytes* b) { b->Str("tokenizer.ggml.eot_token_id", "x"); }, false,
       "tokenizer.ggml.eot_token_id"},
      {"merge without space",
       [](GgufBytes* b) { b->Strs("tokenizer.ggml.merges", {"ab"}); }, false,
       "tokenizer.ggml.merges"},
      {"merge of unknown token",
       [](GgufBytes* b) { b->Strs("tokenizer.ggml.merges", {"a zz"}); }, false,
       "tokenizer.ggml.merges"},
      {"merge making an unknown token",
       [](GgufBytes* b) { b->Strs("tokenizer.ggml.merges", {"b a"}); }, false,
       "tokenizer.ggml.merges"},
      {"merges of integers",
       [](GgufBytes* b) { b->I32s("tokenizer.ggml.merges", {1}); }, false,
       "tokenizer.ggml.merges"},
      {"add_bos not a bool",
       [](GgufBytes* b) { b->Str("tokenizer.ggml.add_bos_token", "yes"); },
       false, "tokenizer.ggml.add_bos_token"},
      {"chat template not a string",
       [](GgufBytes* b) { b->U32("tokenizer.chat_template", 3); }, false,
       "tokenizer.chat_template"},
      {"scores too short",
       [](GgufBytes* b) { b->F32s("tokenizer.ggml.scores", {0, 1}); }, true,
       "tokenizer.ggml.scores"},
      {"scores of strings",
       [](GgufBytes* b) { b->Strs("tokenizer.ggml.scores", {"0"}); }, true,
       "tokenizer.ggml.scores"},
      {"space prefix not a bool",
       [](GgufBytes* b) { b->U32("tokenizer.ggml.add_space_prefix", 1); }, true,
       "tokenizer.ggml.add_space_prefix"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    GgufBytes b = c.spm ? SpmFile() : Gpt2File();
    c.edit(&b);
    auto g = Load(b);
    if (g.ok()) {
      ADD_FAILURE() << "accepted";
      continue;
    }
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument)
        << g.status();
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.key));
  }
}

TEST(GgufTokenizerTest, SpmWithoutScoresIsInvalid) {
  GgufBytes b;
  b.Str("tokenizer.ggml.model", "llama")
      .Strs("tokenizer.ggml.tokens", {"a", "b"});
  auto g = Load(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("tokenizer.ggml.scores"));
}

TEST(GgufTokenizerTest, UnknownPreErrorListsSupportedTypes) {
  GgufBytes b = Gpt2File();
  b.Str("tokenizer.ggml.pre", "mystery");
  auto g = Load(b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("tokenizer.ggml.pre"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("llama-bpe"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("smollm"));
}

}  // namespace
}  // namespace inferd
