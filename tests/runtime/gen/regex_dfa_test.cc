#include "runtime/gen/regex_dfa.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gtest/gtest.h"

namespace inferd {
namespace {

bool Matches(absl::string_view pattern, absl::string_view text) {
  absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(pattern);
  EXPECT_TRUE(dfa.ok()) << pattern << ": " << dfa.status();
  return dfa.ok() && dfa->FullMatch(text);
}

TEST(ByteDfaTest, FullMatchBasics) {
  EXPECT_TRUE(Matches("abc", "abc"));
  EXPECT_FALSE(Matches("abc", "abcd"));
  EXPECT_FALSE(Matches("abc", "ab"));
  EXPECT_TRUE(Matches("a|bc", "bc"));
  EXPECT_TRUE(Matches("(ab)*", ""));
  EXPECT_TRUE(Matches("(ab)*", "ababab"));
  EXPECT_FALSE(Matches("(ab)*", "aba"));
  EXPECT_TRUE(Matches("a{2,3}", "aaa"));
  EXPECT_FALSE(Matches("a{2,3}", "aaaa"));
  EXPECT_TRUE(Matches("a{,2}b", "b"));
  EXPECT_TRUE(Matches("x{2,}", "xxxxx"));
  EXPECT_TRUE(Matches("a{", "a{"));  // not a quantifier: literal
  EXPECT_TRUE(Matches("^\\d+\\.\\d*$", "12."));
  EXPECT_TRUE(Matches("[^a-c]", "日"));
  EXPECT_FALSE(Matches("[^a-c]", "b"));
  EXPECT_TRUE(Matches(".", "😀"));
  EXPECT_FALSE(Matches(".", "\n"));
  EXPECT_TRUE(Matches("[é-ë]+", "éêë"));
  EXPECT_FALSE(Matches("[é-ë]", "ì"));
  EXPECT_TRUE(Matches("\\u00e9\\x41", "éA"));
  EXPECT_TRUE(Matches("(?P<year>\\d{4})-(?:\\d\\d)", "2024-05"));
  EXPECT_TRUE(Matches("a*?b+?", "aab"));
}

// Every UTF-8 encoding of a code point range, at the length boundaries.
TEST(ByteDfaTest, Utf8RangesAcrossEncodingLengths) {
  absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile("[\\x7e-\\U00010001]");
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  for (char32_t c : {0x7Eu, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFu, 0x1000u,
                     0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10001u}) {
    std::string s;
    if (c < 0x80) {
      s = std::string(1, static_cast<char>(c));
    } else if (c < 0x800) {
      s = {static_cast<char>(0xC0 | (c >> 6)),
           static_cast<char>(0x80 | (c & 0x3F))};
    } else if (c < 0x10000) {
      s = {static_cast<char>(0xE0 | (c >> 12)),
           static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
           static_cast<char>(0x80 | (c & 0x3F))};
    } else {
      s = {static_cast<char>(0xF0 | (c >> 18)),
           static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
           static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
           static_cast<char>(0x80 | (c & 0x3F))};
    }
    EXPECT_TRUE(dfa->FullMatch(s)) << std::hex << c;
  }
  EXPECT_FALSE(dfa->FullMatch("}"));              // 0x7D
  EXPECT_FALSE(dfa->FullMatch("\xF0\x90\x80\x82"));  // U+10002
  EXPECT_FALSE(dfa->FullMatch("\xC3"));              // a truncated character
}

TEST(ByteDfaTest, DeadStatesAreRemoved) {
  // After "ab" only "c" can lead to a match; every other byte is dead at
  // once rather than after more input.
  absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile("abc|abd");
  ASSERT_TRUE(dfa.ok());
  int32_t s = dfa->Next(dfa->Next(dfa->start(), 'a'), 'b');
  ASSERT_NE(s, ByteDfa::kDead);
  EXPECT_EQ(dfa->Next(s, 'x'), ByteDfa::kDead);
  const int32_t end = dfa->Next(s, 'c');
  ASSERT_NE(end, ByteDfa::kDead);
  EXPECT_TRUE(dfa->accepting(end));
  EXPECT_FALSE(dfa->has_next(end));
}

TEST(ByteDfaTest, UnsupportedFeaturesAreNamed) {
  struct Case {
    const char* pattern;
    const char* message;
  } cases[] = {
      {"(a)\\1", "backreference"},
      {"a(?=b)", "lookahead"},
      {"(?<=a)b", "lookbehind"},
      {"\\bword", "word boundary"},
      {"(?i)abc", "inline flag"},
      {"a^b", "'^'"},
      {"a$b", "'$'"},
      {"a++", "possessive"},
      {"*a", "nothing to repeat"},
      {"(ab", "missing ')'"},
      {"ab)", "unbalanced ')'"},
      {"[z-a]", "bad character range"},
      {"a**", "multiple repeat"},
      {"a{2000}", "above 1000"},
      {"[^\\x00-\\U0010ffff]", "matches no string"},
      {"\\q", "unknown escape"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(c.pattern);
    ASSERT_FALSE(dfa.ok()) << c.pattern;
    EXPECT_EQ(dfa.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(dfa.status().message().find(c.message), std::string::npos)
        << c.pattern << " -> " << dfa.status().message();
  }
}

TEST(ByteDfaTest, TooComplexIsInvalidArgument) {
  RegexLimits limits;
  limits.max_dfa_states = 100;
  absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile("[ab]{0,500}", limits);
  ASSERT_FALSE(dfa.ok());
  EXPECT_NE(dfa.status().message().find("too complex"), std::string::npos);
}

// Pathological patterns (hostile input, docs/hostile-input.md): each is
// refused by one of the limits, naming it.
TEST(ByteDfaTest, PathologicalPatternsHitTheirLimit) {
  std::string odd_bytes;
  for (int b = 0x21; b < 0x7F; b += 2) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "\\x%02x", b);
    odd_bytes += hex;
  }
  RegexLimits few_steps;  // the step limit, reached sooner
  few_steps.max_steps = 5000000;
  struct Case {
    std::string pattern;
    RegexLimits limits;
    const char* message;
  } cases[] = {
      // 2^25 DFA states.
      {"(a|b)*a(a|b){24}", {}, "more than 50000 DFA states"},
      // A million NFA states.
      {"(a{1000}){1000}", {}, "more than 400000 NFA states"},
      // 401 DFA states, each standing for the optional copies still ahead,
      // ~95 byte classes: about 500 million steps of subset construction.
      {"([" + odd_bytes + "]?){400}", few_steps, "more than 5000000 steps"},
      {std::string(300, '(') + "a" + std::string(300, ')'), {},
       "nested too deeply"},
  };
  for (const Case& c : cases) {
    int64_t steps = -1;
    absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(c.pattern, c.limits, &steps);
    ASSERT_FALSE(dfa.ok()) << c.pattern.substr(0, 60);
    EXPECT_EQ(dfa.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(dfa.status().message().find(c.message), std::string::npos)
        << c.pattern.substr(0, 60) << " -> " << dfa.status().message();
    // Stopped soon after the limit (one closure past it at most).
    EXPECT_LE(steps, c.limits.max_steps + 1000000) << c.message;
  }
  // The same shape with fewer copies compiles, and says what it cost.
  int64_t steps = 0;
  absl::StatusOr<ByteDfa> small =
      ByteDfa::Compile("([" + odd_bytes + "]?){10}", {}, &steps);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_GT(steps, 0);
  EXPECT_TRUE(small->FullMatch("!#%"));
  EXPECT_FALSE(small->FullMatch("\"\""));
}

TEST(ByteDfaTest, PatternsMustBeStrictUtf8) {
  for (const char* bad : {"\xc0\x80",           // overlong NUL
                          "\xe0\x80\xaf",       // overlong '/'
                          "\xed\xa0\x80",       // a surrogate
                          "\xf4\x90\x80\x80",  // past U+10FFFF
                          "a\xff", "\xc3"}) {
    absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(bad);
    ASSERT_FALSE(dfa.ok());
    EXPECT_NE(dfa.status().message().find("not valid UTF-8"),
              std::string::npos)
        << dfa.status();
  }
  EXPECT_TRUE(Matches("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"));  // U+10FFFF
}

TEST(ByteDfaTest, RegexEscapeMatchesLiterally) {
  const std::string text = "a.b*c(d)[e]{f}|g?h+i^j$k\\l\nm日";
  absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(RegexEscape(text));
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  EXPECT_TRUE(dfa->FullMatch(text));
  EXPECT_FALSE(dfa->FullMatch(text + "x"));
}

// Differential: random patterns and strings with the answers of Python's
// re.fullmatch (tools/make_regex_cases.py wrote them).
TEST(ByteDfaTest, AgreesWithPythonReFullmatch) {
  std::ifstream in(std::string(INFERD_SOURCE_DIR) +
                   "/tests/data/regex_cases.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  int patterns = 0, strings = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    const std::string pattern = j["pattern"];
    absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(pattern);
    ASSERT_TRUE(dfa.ok()) << pattern << ": " << dfa.status();
    ++patterns;
    for (const auto& c : j["cases"]) {
      const std::string text = c[0];
      const bool expected = c[1];
      EXPECT_EQ(dfa->FullMatch(text), expected)
          << "pattern " << pattern << " text \"" << text << "\"";
      ++strings;
    }
  }
  EXPECT_GE(patterns, 300);
  EXPECT_GE(strings, 3000);
}

}  // namespace
}  // namespace inferd
