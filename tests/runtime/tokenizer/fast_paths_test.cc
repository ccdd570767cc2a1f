// The tokenizer's fast paths must give exactly what the general code gives:
// the hand-written pre-tokenizer regex matchers against Oniguruma, and
// unedited (implicitly aligned) NormalizedStrings against edited ones.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tokenizer/normalized_string.h"
#include "runtime/tokenizer/pre_tokenizers.h"
#include "runtime/tokenizer/regex.h"
#include "tests/runtime/tokenizer/test_util.h"

namespace inferd {
namespace {

using tokenizer_internal::CompileRegexPattern;
using tokenizer_internal::NormalizedString;
using tokenizer_internal::Pattern;
using tokenizer_internal::PreTokenizerRegexPattern;
using tokenizer_internal::Range;
using tokenizer_internal::Regex;
using tokenizer_internal::RegexPattern;

struct RegexCase {
  const char* name;
  const char* regex;
};

const RegexCase kRegexes[] = {
    {"gpt2", tokenizer_internal::kGpt2Pattern},
    {"llama3",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
};

std::vector<Range> Matches(const Pattern& p, const std::string& text) {
  std::vector<Range> out;
  p.FindMatches(text, &out);
  return out;
}

// Texts: every reference case text, random strings over all ASCII bytes
// (biased towards the characters the patterns treat specially), and random
// strings mixing in non-ASCII letters, digits, spaces and case-folding
// characters.
std::vector<std::string> Texts() {
  std::vector<std::string> texts;
  for (const char* n : {"llama3", "qwen3", "gpt2", "bert-base-uncased",
                        "llama2", "roberta-base", "stories260K"}) {
    std::vector<testing_util::Case> cases;
    if (!testing_util::ReadCases(n, &cases)) continue;
    std::string all;
    for (const auto& c : cases) {
      texts.push_back(c.text);
      all += c.text;
    }
    texts.push_back(all);
  }
  std::mt19937 rng(1234);
  const std::string special = " \t\n\r\v\f'sStTrReEvVmMlLdD09!.,-_(\"";
  for (int i = 0; i < 20000; ++i) {
    std::string t;
    const int len = static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) {
      t += (rng() % 2) ? special[rng() % special.size()]
                       : static_cast<char>(rng() % 128);
    }
    texts.push_back(t);
  }
  const char* pieces[] = {"a",
                          "Z",
                          " ",
                          "  ",
                          "\n",
                          "\r\n",
                          "\t",
                          "'",
                          "s",
                          "L",
                          "e",
                          "1",
                          "2",
                          ".",
                          "?!",
                          "\xC3\xA9",          // e acute (letter)
                          "\xC2\xA0",          // no-break space
                          "\xC2\x85",          // next line (space)
                          "\xC5\xBF",          // long s (folds to s)
                          "\xE2\x84\xAA",      // Kelvin sign (folds to k)
                          "\xD9\xA1",          // Arabic-Indic one (digit)
                          "\xC2\xB2",          // superscript two (No)
                          "\xE2\x80\x83",      // em space
                          "\xE4\xB8\xAD",      // CJK letter
                          "\xF0\x9F\x98\x80",  // emoji (other)
                          "\xCC\x81"};         // combining acute (mark)
  const size_t n = sizeof(pieces) / sizeof(pieces[0]);
  for (int i = 0; i < 20000; ++i) {
    std::string t;
    const int len = static_cast<int>(rng() % 16);
    for (int k = 0; k < len; ++k) t += pieces[rng() % n];
    texts.push_back(t);
  }
  return texts;
}

TEST(PreTokenizerRegexTest, HandWrittenMatchersEqualTheRegexOnAllTexts) {
  const std::vector<std::string> texts = Texts();
  for (const RegexCase& rc : kRegexes) {
    auto fast = CompileRegexPattern(rc.regex);
    ASSERT_TRUE(fast.ok()) << fast.status();
    ASSERT_NE(dynamic_cast<PreTokenizerRegexPattern*>(fast->get()), nullptr)
        << rc.name << " is not recognized";
    auto re = Regex::Compile(rc.regex);
    ASSERT_TRUE(re.ok()) << re.status();
    const RegexPattern slow(*std::move(re));
    int mismatches = 0;
    for (const std::string& t : texts) {
      const std::vector<Range> want = Matches(slow, t);
      const std::vector<Range> got = Matches(**fast, t);
      if (want != got && ++mismatches <= 5) {
        ADD_FAILURE() << rc.name << ": matches differ on \"" << t << "\"";
      }
    }
    EXPECT_EQ(mismatches, 0) << rc.name << " over " << texts.size() << " texts";
  }
}

TEST(PreTokenizerRegexTest, OtherRegexesUseOniguruma) {
  auto p = CompileRegexPattern("\\p{N}|\\p{L}+");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(dynamic_cast<PreTokenizerRegexPattern*>(p->get()), nullptr);
  EXPECT_EQ(Matches(**p, "ab12"), (std::vector<Range>{{0, 2}, {2, 3}, {3, 4}}));
}

// Every range and sub-range of `ns` gives the same original offsets through
// Slice(...).ToOriginal(...) and ToOriginalWithin(...).
void ExpectConsistentOffsets(const NormalizedString& ns,
                             const NormalizedString& ref) {
  ASSERT_EQ(ns.get(), ref.get());
  const size_t n = ns.size();
  for (size_t a = 0; a <= n; ++a) {
    for (size_t b = a; b <= n; ++b) {
      ASSERT_EQ(ns.ToOriginal(a, b), ref.ToOriginal(a, b)) << a << "," << b;
      const NormalizedString s = ns.Slice(a, b);
      const NormalizedString rs = ref.Slice(a, b);
      ASSERT_EQ(s.original_start(), rs.original_start());
      ASSERT_EQ(s.original_end(), rs.original_end());
      for (size_t x = 0; x <= b - a; ++x) {
        for (size_t y = x; y <= b - a; ++y) {
          ASSERT_EQ(s.ToOriginal(x, y), rs.ToOriginal(x, y));
          ASSERT_EQ(ns.ToOriginalWithin(a, b, x, y), rs.ToOriginal(x, y));
        }
      }
    }
  }
}

TEST(NormalizedStringTest, UneditedTextAlignsLikeExplicitAlignments) {
  const std::string text = "a\xC3\xA9 \xE4\xB8\xAD\xF0\x9F\x98\x80z";
  const NormalizedString implicit(text, 7);
  // An edit that changes nothing still builds explicit alignments.
  NormalizedString explicit_align(text, 7);
  explicit_align.ReplaceRanges({{0, 1}}, "a");
  ExpectConsistentOffsets(implicit, explicit_align);
}

TEST(NormalizedStringTest, PrependToUneditedTextAlignsLikeExplicitAlignments) {
  const std::string text = "a\xC3\xA9 \xE4\xB8\xAD\xF0\x9F\x98\x80z";
  NormalizedString implicit(text, 7);
  implicit.Prepend("\xE2\x96\x81");
  NormalizedString explicit_align(text, 7);
  explicit_align.ReplaceRanges({{0, 1}}, "a");
  explicit_align.Prepend("\xE2\x96\x81");
  ExpectConsistentOffsets(implicit, explicit_align);
}

TEST(NormalizedStringTest, ReplaceAndPrependAlignInsertedText) {
  NormalizedString ns("a b", 10);
  ns.Prepend("\xE2\x96\x81");
  ns.ReplaceChar(' ', "\xE2\x96\x81");
  EXPECT_EQ(ns.get(),
            "\xE2\x96\x81"
            "a\xE2\x96\x81"
            "b");
  EXPECT_EQ(ns.ToOriginal(0, 3), std::make_pair(10u, 10u));  // Prepended.
  EXPECT_EQ(ns.ToOriginal(3, 4), std::make_pair(10u, 11u));  // a
  EXPECT_EQ(ns.ToOriginal(4, 7), std::make_pair(11u, 12u));  // The space.
  EXPECT_EQ(ns.ToOriginal(7, 8), std::make_pair(12u, 13u));  // b
}

}  // namespace
}  // namespace inferd
