// Behaviour tests for Tokenizer and IncrementalDecoder on the real shared
// tokenizers: GPT-2 built from encoder.json + vocab.bpe, round trips, pairs,
// truncation, offsets, streaming detokenization and malformed input.
#include "runtime/tokenizer/tokenizer.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/incremental_decoder.h"
#include "runtime/tokenizer/unicode_util.h"
#include "tests/runtime/tokenizer/test_util.h"

namespace inferd {
namespace {

using testing_util::Case;

std::unique_ptr<Tokenizer> Load(const std::string& name) {
  auto tok = Tokenizer::FromFile(testing_util::TokenizerPath(name));
  if (!tok.ok()) return nullptr;
  return *std::move(tok);
}

#define LOAD_OR_SKIP(var, name)                                     \
  std::unique_ptr<Tokenizer> var = Load(name);                      \
  if (var == nullptr) {                                             \
    GTEST_SKIP() << "tokenizer " << name << " not available under " \
                 << testing_util::SharedDir();                      \
  }

// A byte-level BPE tokenizer.json assembled from GPT-2's original files.
bool BuildGpt2Json(std::string* out) {
  std::string encoder, merges;
  const std::string dir = testing_util::SharedDir() + "/tokenizers/gpt2/";
  if (!testing_util::ReadFile(dir + "encoder.json", &encoder) ||
      !testing_util::ReadFile(dir + "vocab.bpe", &merges)) {
    return false;
  }
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", nlohmann::json::parse(encoder)}};
  nlohmann::json merge_list = nlohmann::json::array();
  for (absl::string_view line :
       absl::StrSplit(merges, '\n', absl::SkipEmpty())) {
    if (line.substr(0, 8) == "#version") continue;
    merge_list.push_back(std::string(line));
  }
  j["model"]["merges"] = merge_list;
  j["pre_tokenizer"] = {{"type", "ByteLevel"},
                        {"add_prefix_space", false},
                        {"trim_offsets", true},
                        {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["post_processor"] = {{"type", "ByteLevel"}, {"trim_offsets", false}};
  *out = j.dump();
  return true;
}

TEST(Gpt2FromOriginalFilesTest, EncodesEveryCaseIdForId) {
  std::string json;
  std::vector<Case> cases;
  if (!BuildGpt2Json(&json) || !testing_util::ReadCases("gpt2", &cases)) {
    GTEST_SKIP() << "gpt2 files not found under " << testing_util::SharedDir();
  }
  auto tok = Tokenizer::FromJson(json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  int passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto enc = (*tok)->Encode(cases[i].text, false);
    ASSERT_TRUE(enc.ok());
    if (enc->ids == cases[i].ids) {
      ++passed;
    } else {
      ADD_FAILURE() << "gpt2 case " << i << " [" << cases[i].text << "] want "
                    << absl::StrJoin(cases[i].ids, " ") << " got "
                    << absl::StrJoin(enc->ids, " ");
    }
    auto text = (*tok)->Decode(enc->ids, false);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, cases[i].text) << "gpt2 round trip, case " << i;
  }
  std::cout << "[ cases    ] gpt2: " << passed << "/" << cases.size()
            << " passed\n";
}

class LosslessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LosslessTest, DecodeOfEncodeGivesBackEveryCaseText) {
  LOAD_OR_SKIP(tok, GetParam());
  std::vector<Case> cases;
  ASSERT_TRUE(testing_util::ReadCases("llama3", &cases));
  for (const Case& c : cases) {
    auto enc = tok->Encode(c.text, false);
    ASSERT_TRUE(enc.ok());
    auto text = tok->Decode(enc->ids, false);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, c.text) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Lossless, LosslessTest,
                         ::testing::Values("llama2", "mistral", "llama3",
                                           "qwen3", "roberta-base"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

class StreamingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamingTest, DeltasConcatenateToFullDecodeAndAreValidUtf8) {
  LOAD_OR_SKIP(tok, GetParam());
  std::vector<Case> cases;
  if (!testing_util::ReadCases("llama3", &cases)) {
    // Without ../shared (stories260K ships in the repository): a few texts
    // of our own.
    for (const char* t : {"Once upon a time, there was a little girl.",
                          "  leading and   inner   spaces\n\ttabs",
                          "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 dash",
                          "\xE6\x9D\xB1\xE4\xBA\xAC 123 + 4.5 = ?"}) {
      cases.push_back({t, {}});
    }
  }
  // Also some text that needs byte fallback / multi-byte merges.
  cases.push_back(
      {"emoji \xF0\x9F\xA6\x99 and \xE1\x9E\x80\xE1\x9E\xB6 "
       "\xE4\xBD\xA0\xE5\xA5\xBD",
       {}});
  for (bool skip : {false, true}) {
    for (const Case& c : cases) {
      auto enc = tok->Encode(c.text, true);
      ASSERT_TRUE(enc.ok());
      auto full = tok->Decode(enc->ids, skip);
      ASSERT_TRUE(full.ok());
      IncrementalDecoder dec(*tok, skip);
      std::string joined;
      for (int32_t id : enc->ids) {
        const std::string delta = dec.Push(id);
        EXPECT_TRUE(tokenizer_internal::IsValidUtf8(delta));
        joined += delta;
      }
      joined += dec.Flush();
      EXPECT_EQ(joined, *full) << GetParam() << " text [" << c.text << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, StreamingTest,
                         ::testing::Values("llama2", "mistral", "llama3",
                                           "qwen3", "roberta-base",
                                           "bert-base-uncased", "t5-small",
                                           "xlm-roberta", "stories260K"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// stories260K ships in the repository; llama2 (../shared) when present.
std::vector<std::string> ByteFallbackTokenizers() {
  std::vector<std::string> names = {"stories260K"};
  if (Load("llama2") != nullptr) names.push_back("llama2");
  return names;
}

TEST(IncrementalDecoderTest, HoldsBackIncompleteByteFallbackSequence) {
  for (const std::string& name : ByteFallbackTokenizers()) {
    std::unique_ptr<Tokenizer> tok = Load(name);
    ASSERT_NE(tok, nullptr) << name;
    // U+1F999 has no piece: four byte-fallback tokens.
    auto enc = tok->Encode("\xF0\x9F\xA6\x99", false);
    ASSERT_TRUE(enc.ok());
    ASSERT_GE(enc->ids.size(), 4u) << name;
    IncrementalDecoder dec(*tok, false);
    std::string out;
    for (size_t i = 0; i + 1 < enc->ids.size(); ++i) out += dec.Push(enc->ids[i]);
    EXPECT_EQ(out.find("\xEF\xBF\xBD"), std::string::npos) << name;
    out += dec.Push(enc->ids.back());
    out += dec.Flush();
    EXPECT_EQ(out, "\xF0\x9F\xA6\x99") << name;
  }
}

TEST(IncrementalDecoderTest, PromptContextIsNotEmitted) {
  for (const std::string& name : ByteFallbackTokenizers()) {
    std::unique_ptr<Tokenizer> tok = Load(name);
    ASSERT_NE(tok, nullptr) << name;
    auto prompt = tok->Encode("Once upon a", true);
    auto rest = tok->Encode("Once upon a time there", true);
    ASSERT_TRUE(prompt.ok() && rest.ok());
    ASSERT_GT(rest->ids.size(), prompt->ids.size());
    IncrementalDecoder dec(*tok, true, prompt->ids);
    std::string out;
    for (size_t i = prompt->ids.size(); i < rest->ids.size(); ++i) {
      out += dec.Push(rest->ids[i]);
    }
    out += dec.Flush();
    EXPECT_EQ(out, " time there") << name;
  }
}

TEST(PairEncodingTest, BertAddsClsSepAndTypeIds) {
  LOAD_OR_SKIP(tok, "bert-base-uncased");
  auto enc = tok->EncodePair("Hello", "world", true);
  ASSERT_TRUE(enc.ok());
  const int32_t hello = *tok->TokenToId("hello");
  const int32_t world = *tok->TokenToId("world");
  const int32_t cls = *tok->TokenToId("[CLS]");
  const int32_t sep = *tok->TokenToId("[SEP]");
  EXPECT_EQ(enc->ids, (std::vector<int32_t>{cls, hello, sep, world, sep}));
  EXPECT_EQ(enc->type_ids, (std::vector<int32_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(enc->sequence_ids, (std::vector<int32_t>{-1, 0, -1, 1, -1}));
  EXPECT_EQ(enc->special_tokens_mask, (std::vector<uint8_t>{1, 0, 1, 0, 1}));
  EXPECT_EQ(enc->offsets[1], (std::pair<uint32_t, uint32_t>(0, 5)));
  EXPECT_EQ(enc->offsets[3], (std::pair<uint32_t, uint32_t>(0, 5)));
  EXPECT_EQ(tok->NumSpecialTokensToAdd(true), 3);
  EXPECT_EQ(tok->NumSpecialTokensToAdd(false), 2);
  auto text = tok->Decode(enc->ids, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello world");
}

TEST(PairEncodingTest, RobertaUsesDoubleSeparatorAndZeroTypeIds) {
  LOAD_OR_SKIP(tok, "roberta-base");
  auto a = tok->Encode("Hello", false);
  auto b = tok->Encode(" world", false);
  auto enc = tok->EncodePair("Hello", " world", true);
  ASSERT_TRUE(a.ok() && b.ok() && enc.ok());
  std::vector<int32_t> want = {0};
  want.insert(want.end(), a->ids.begin(), a->ids.end());
  want.insert(want.end(), {2, 2});
  want.insert(want.end(), b->ids.begin(), b->ids.end());
  want.push_back(2);
  EXPECT_EQ(enc->ids, want);
  EXPECT_EQ(enc->type_ids, std::vector<int32_t>(want.size(), 0));
  EXPECT_EQ(tok->NumSpecialTokensToAdd(true), 4);
  // trim_offsets: " world" token points at "world", not the space.
  const auto off = enc->offsets[enc->size() - 2];
  EXPECT_EQ(std::string(" world").substr(off.first, off.second - off.first),
            "world");
}

TEST(SpecialTokensTest, AddedSpecialTokensAreMatchedAndSkippable) {
  LOAD_OR_SKIP(tok, "llama3");
  const std::string text = "<|begin_of_text|>Hi<|eot_id|>";
  auto enc = tok->Encode(text, false);
  ASSERT_TRUE(enc.ok());
  ASSERT_EQ(enc->ids.size(), 3u);
  EXPECT_EQ(enc->ids[0], 128000);
  EXPECT_EQ(enc->ids[2], *tok->TokenToId("<|eot_id|>"));
  EXPECT_TRUE(tok->IsSpecial(128000));
  EXPECT_FALSE(tok->IsSpecial(enc->ids[1]));
  EXPECT_EQ(enc->special_tokens_mask, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(*tok->Decode(enc->ids, false), text);
  EXPECT_EQ(*tok->Decode(enc->ids, true), "Hi");
  EXPECT_EQ(tok->vocab_size(), 128256u);
}

// Independent reference: remove one token at a time from the longer
// sequence; on ties from the one that was shorter to begin with (the first
// when they started equal), so the originally longer one keeps the odd token.
std::pair<size_t, size_t> IterativeLongestFirst(size_t n1, size_t n2,
                                                size_t max) {
  const bool first_was_longer = n1 > n2;
  while (n1 + n2 > max) {
    if (n1 > n2 || (n1 == n2 && !first_was_longer)) {
      --n1;
    } else {
      --n2;
    }
  }
  return {n1, n2};
}

TEST(TruncationTest, AllStrategiesAndSidesKeepTheRightTokens) {
  LOAD_OR_SKIP(tok, "bert-base-uncased");
  const std::string a =
      "the quick brown fox jumps over the lazy dog again and again";
  const std::string b = "a b c d e";
  auto fa = tok->Encode(a, false);
  auto fb = tok->Encode(b, false);
  ASSERT_TRUE(fa.ok() && fb.ok());
  const size_t na = fa->size(), nb = fb->size();
  ASSERT_GT(na, nb);
  for (TruncationSide side : {TruncationSide::kRight, TruncationSide::kLeft}) {
    for (size_t max_len : {size_t{6}, size_t{10}, size_t{15}, size_t{40}}) {
      TruncationParams p;
      p.max_length = max_len;
      p.side = side;
      p.strategy = TruncationStrategy::kLongestFirst;
      auto enc = tok->EncodePair(a, b, true, p);
      ASSERT_TRUE(enc.ok());
      const auto want = IterativeLongestFirst(na, nb, max_len - 3);
      size_t got_a = 0, got_b = 0;
      for (int32_t s : enc->sequence_ids) {
        got_a += s == 0;
        got_b += s == 1;
      }
      EXPECT_EQ(got_a, want.first) << max_len;
      EXPECT_EQ(got_b, want.second) << max_len;
      EXPECT_LE(enc->size(), max_len);
      // Kept tokens are the first (right side) or last (left side) ones.
      const size_t skip = side == TruncationSide::kRight ? 0 : na - got_a;
      for (size_t i = 0; i < got_a; ++i) {
        EXPECT_EQ(enc->ids[1 + i], fa->ids[skip + i]);
      }
    }
    TruncationParams only_first{nb + 3 + 4, TruncationStrategy::kOnlyFirst,
                                side};
    auto enc = tok->EncodePair(a, b, true, only_first);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->size(), nb + 7);
    EXPECT_EQ(enc->ids[1],
              fa->ids[side == TruncationSide::kRight ? 0 : na - 4]);
    TruncationParams only_second{na + 3 + 2, TruncationStrategy::kOnlySecond,
                                 side};
    enc = tok->EncodePair(a, b, true, only_second);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->size(), na + 5);
    // only_second cannot shrink a short second sequence enough.
    TruncationParams impossible{5, TruncationStrategy::kOnlySecond, side};
    EXPECT_EQ(tok->EncodePair(a, b, true, impossible).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(tok->Encode(a, true, impossible).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  TruncationParams single{5, TruncationStrategy::kLongestFirst,
                          TruncationSide::kLeft};
  auto enc = tok->Encode(a, true, single);
  ASSERT_TRUE(enc.ok());
  ASSERT_EQ(enc->size(), 5u);
  EXPECT_EQ(enc->ids[1], fa->ids[na - 3]);
  EXPECT_EQ(enc->ids.back(), *tok->TokenToId("[SEP]"));
}

TEST(OffsetsTest, ByteLevelOffsetsCoverTheTokenBytes) {
  LOAD_OR_SKIP(tok, "llama3");
  std::vector<Case> cases;
  ASSERT_TRUE(testing_util::ReadCases("llama3", &cases));
  for (const Case& c : cases) {
    auto enc = tok->Encode(c.text, false);
    ASSERT_TRUE(enc.ok());
    uint32_t prev_end = 0;
    for (size_t i = 0; i < enc->size(); ++i) {
      const auto off = enc->offsets[i];
      ASSERT_LE(off.first, off.second);
      ASSERT_LE(off.second, c.text.size());
      // Monotone up to tokens sharing one multi-byte character.
      EXPECT_GE(off.first + 4, prev_end);
      prev_end = off.second;
      const std::string piece =
          c.text.substr(off.first, off.second - off.first);
      const std::string decoded = *tok->Decode({enc->ids[i]}, false);
      if (tokenizer_internal::IsValidUtf8(decoded) &&
          decoded.find("\xEF\xBF\xBD") == std::string::npos) {
        EXPECT_EQ(piece, decoded) << "[" << c.text << "] token " << i;
      } else {
        // A token holding part of a character points at that character.
        EXPECT_FALSE(piece.empty());
      }
    }
  }
}

TEST(OffsetsTest, NormalizedOffsetsPointIntoTheOriginalText) {
  LOAD_OR_SKIP(tok, "bert-base-uncased");
  const std::string text = "Héllo, WORLD! 你好";
  auto enc = tok->Encode(text, false);
  ASSERT_TRUE(enc.ok());
  const std::vector<std::string> want = {"Héllo", ",",  "WORLD",
                                         "!",     "你", "好"};
  ASSERT_EQ(enc->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto off = enc->offsets[i];
    EXPECT_EQ(text.substr(off.first, off.second - off.first), want[i]);
  }
}

TEST(OffsetsTest, MetaspaceOffsetsSkipTheReplacementCharacter) {
  LOAD_OR_SKIP(tok, "llama2");
  const std::string text = "Hello world";
  auto enc = tok->Encode(text, false);
  ASSERT_TRUE(enc.ok());
  ASSERT_EQ(enc->tokens, (std::vector<std::string>{"\xE2\x96\x81Hello",
                                                   "\xE2\x96\x81world"}));
  EXPECT_EQ(enc->offsets[0], (std::pair<uint32_t, uint32_t>(0, 5)));
  EXPECT_EQ(enc->offsets[1], (std::pair<uint32_t, uint32_t>(5, 11)));
}

TEST(UnigramTest, XlmRobertaKnownIds) {
  LOAD_OR_SKIP(tok, "xlm-roberta");
  auto enc = tok->Encode("Hello world", true);
  ASSERT_TRUE(enc.ok());
  // Whole-word pieces from the vocabulary itself.
  const int32_t hello = *tok->TokenToId("\xE2\x96\x81Hello");
  const int32_t world = *tok->TokenToId("\xE2\x96\x81world");
  EXPECT_EQ(hello, 35378);
  EXPECT_EQ(world, 8999);
  EXPECT_EQ(enc->ids, (std::vector<int32_t>{0, hello, world, 2}));
  EXPECT_EQ(*tok->Decode(enc->ids, true), "Hello world");
}

TEST(UnigramTest, T5KnownIdsAndPrecompiledNormalization) {
  LOAD_OR_SKIP(tok, "t5-small");
  auto enc = tok->Encode("Hello world", true);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(*tok->TokenToId("\xE2\x96\x81Hello"), 8774);
  EXPECT_EQ(*tok->TokenToId("\xE2\x96\x81world"), 296);
  EXPECT_EQ(enc->ids, (std::vector<int32_t>{8774, 296, 1}));
  EXPECT_EQ(*tok->Decode(enc->ids, true), "Hello world");
  // The charsmap maps full-width letters to ASCII (NFKC-like).
  auto fw = tok->Encode(
      "\xEF\xBC\xA8\xEF\xBD\x85\xEF\xBD\x8C\xEF\xBD\x8C\xEF\xBD\x8F world",
      false);
  ASSERT_TRUE(fw.ok());
  EXPECT_EQ(fw->ids, (std::vector<int32_t>{8774, 296}));
  EXPECT_EQ(fw->offsets[0], (std::pair<uint32_t, uint32_t>(0, 15)));
}

TEST(LoadTest, EveryTokenizerLoadsAndRoundTripsSimpleText) {
  for (const char* name :
       {"llama2", "mistral", "llama3", "qwen3", "roberta-base", "t5-small",
        "bert-base-uncased", "xlm-roberta", "stories260K"}) {
    auto tok = Tokenizer::FromFile(testing_util::TokenizerPath(name));
    if (tok.status().code() == absl::StatusCode::kNotFound) continue;
    ASSERT_TRUE(tok.ok()) << name << ": " << tok.status();
    auto enc = (*tok)->Encode("the cat sat on the mat", false);
    ASSERT_TRUE(enc.ok());
    auto text = (*tok)->Decode(enc->ids, false);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, "the cat sat on the mat") << name;
  }
}

TEST(MalformedInputTest, ReturnsClearErrors) {
  auto unknown = Tokenizer::FromJson(
      R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},
          "normalizer":{"type":"Frobnicate"}})");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("Frobnicate"), std::string::npos);
  auto unknown_model = Tokenizer::FromJson(R"({"model":{"type":"Magic"}})");
  EXPECT_EQ(unknown_model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown_model.status().message().find("Magic"), std::string::npos);
  EXPECT_EQ(Tokenizer::FromJson("{\"model\": ").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::FromJson(R"({"normalizer":null})").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::FromJson(R"({"model":{"type":"BPE","vocab":[1,2]}})")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::FromJson(
                R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}})")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::FromFile("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);

  auto tok = Tokenizer::FromJson(
      R"({"model":{"type":"WordLevel","vocab":{"a":0,"b":1,"[UNK]":2},"unk_token":"[UNK]"},
          "pre_tokenizer":{"type":"Whitespace"}})");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("a b c", false)->ids,
            (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ((*tok)->Encode("a\xC3(", false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*tok)->EncodePair("a", "\xFF", false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*tok)->Decode({0, 3}, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*tok)->Decode({-1}, false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd
