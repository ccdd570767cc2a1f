#include "runtime/gen/stop_checker.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace inferd {
namespace {

SamplingParams WithStops(std::vector<std::string> stops) {
  SamplingParams p;
  p.stop = std::move(stops);
  return p;
}

// Feeds deltas (token ids 100, 101, ...) until a finish; returns the
// concatenated released text and the last result.
std::string Feed(StopChecker& c, const std::vector<std::string>& deltas,
                 StopCheckResult* last = nullptr) {
  std::string text;
  int32_t id = 100;
  for (const std::string& d : deltas) {
    StopCheckResult r = c.Append(id++, d);
    text += r.text;
    if (last != nullptr) *last = r;
    if (r.finished()) break;
  }
  return text;
}

TEST(StopCheckerTest, MatchesAStopStringAcrossTokenBoundaries) {
  StopChecker c(WithStops({"\n\nUser:"}), {}, 0);
  StopCheckResult r = c.Append(1, "Hello");
  EXPECT_EQ(r.text, "Hello");
  r = c.Append(2, "\n");
  EXPECT_EQ(r.text, "");
  r = c.Append(3, "\nUs");
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(c.num_held_bytes(), 4u);
  r = c.Append(4, "er: hi");
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(r.stop_string, "\n\nUser:");
  EXPECT_EQ(c.released_text(), "Hello");
  EXPECT_TRUE(c.Append(5, "more").text.empty());
}

TEST(StopCheckerTest, ReleasesHeldTextOnceItCanNoLongerMatch) {
  StopChecker c(WithStops({"\n\nUser:"}), {}, 0);
  StopCheckResult r = c.Append(1, "Hi\n\nUs");
  EXPECT_EQ(r.text, "Hi");
  r = c.Append(2, "e");
  EXPECT_EQ(r.text, "");  // "\n\nUse" still a prefix
  r = c.Append(3, "d to");
  EXPECT_EQ(r.text, "\n\nUsed to");
  EXPECT_FALSE(r.finished());
  // A held suffix can restart inside released-looking text.
  r = c.Append(4, " x\n");
  EXPECT_EQ(r.text, " x");
  r = c.Append(5, "y");
  EXPECT_EQ(r.text, "\ny");
  EXPECT_EQ(c.num_held_bytes(), 0u);
}

TEST(StopCheckerTest, IncludesTheStopStringWhenAsked) {
  SamplingParams p = WithStops({"END"});
  p.include_stop_str_in_output = true;
  StopChecker c(p, {}, 0);
  StopCheckResult last;
  EXPECT_EQ(Feed(c, {"abc E", "N", "D tail"}, &last), "abc END");
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);
}

TEST(StopCheckerTest, EarliestMatchWinsAmongSeveralStopStrings) {
  StopChecker c(WithStops({"STOP", "END"}), {}, 0);
  StopCheckResult last;
  EXPECT_EQ(Feed(c, {"abc END xyz STOP"}, &last), "abc ");
  EXPECT_EQ(last.stop_string, "END");
}

TEST(StopCheckerTest, OverlappingStopsResolveTheSameWhateverTheTokenization) {
  // "y" completes before "xyz" does, whether the text arrives at once or
  // character by character.
  for (const std::vector<std::string>& deltas :
       {std::vector<std::string>{"axyz"},
        std::vector<std::string>{"a", "x", "y", "z"},
        std::vector<std::string>{"ax", "yz"}}) {
    StopChecker c(WithStops({"xyz", "y"}), {}, 0);
    StopCheckResult last;
    EXPECT_EQ(Feed(c, deltas, &last), "ax");
    EXPECT_EQ(last.stop_string, "y");
  }
}

TEST(StopCheckerTest, ConcatenatedDeltasEqualTheFinalText) {
  const std::string text =
      "The answer is 42.\n\nUsually we stop here\n\nUser: next question";
  const std::vector<std::string> stops = {"\n\nUser:", "STOP"};
  const std::string expected = text.substr(0, text.find("\n\nUser:"));
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> deltas;
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::min<size_t>(rng() % 5, text.size() - i);
      deltas.push_back(text.substr(i, n));  // empty deltas happen too
      i += n;
    }
    StopChecker c(WithStops(stops), {}, 0);
    StopCheckResult last;
    EXPECT_EQ(Feed(c, deltas, &last), expected) << "trial " << trial;
    EXPECT_EQ(last.finish_reason, FinishReason::kStop);
    EXPECT_EQ(c.released_text(), expected);
  }
}

TEST(StopCheckerTest, HeldTextIsReleasedWhenTheLengthLimitEndsIt) {
  StopChecker c(WithStops({"\n\nUser:"}), {}, 2);
  EXPECT_EQ(c.Append(1, "ok").text, "ok");
  StopCheckResult r = c.Append(2, "\n\nUs");
  EXPECT_EQ(r.text, "\n\nUs");
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
}

TEST(StopCheckerTest, FinishReleasesHeldTextAndFinalDelta) {
  StopChecker c(WithStops({"###"}), {}, 0);
  EXPECT_EQ(c.Append(1, "a#").text, "a");
  StopCheckResult r = c.Finish(FinishReason::kCancelled, "!");
  EXPECT_EQ(r.text, "#!");
  EXPECT_EQ(r.finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(c.finished());
  EXPECT_FALSE(c.Finish(FinishReason::kError).finished());
}

TEST(StopCheckerTest, EosEndsTheGenerationAndItsTextIsDropped) {
  const std::vector<int32_t> eos = {2};
  StopChecker c(SamplingParams(), eos, 0);
  EXPECT_EQ(c.Append(5, "hi").text, "hi");
  StopCheckResult r = c.Append(2, "</s>");
  EXPECT_EQ(r.finish_reason, FinishReason::kEos);
  EXPECT_EQ(r.text, "");
  ASSERT_TRUE(r.stop_token_id.has_value());
  EXPECT_EQ(*r.stop_token_id, 2);
}

TEST(StopCheckerTest, IgnoreEosKeepsGoingButStopTokensStillStop) {
  SamplingParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {7};
  const std::vector<int32_t> eos = {2};
  StopChecker c(p, eos, 0);
  EXPECT_FALSE(c.Append(2, "</s>").finished());
  StopCheckResult r = c.Append(7, "<|end|>");
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(*r.stop_token_id, 7);
  EXPECT_EQ(c.released_text(), "</s>");
}

TEST(StopCheckerTest, NothingStopsBeforeMinTokens) {
  SamplingParams p = WithStops({"END"});
  p.min_tokens = 3;
  const std::vector<int32_t> eos = {2};
  StopChecker c(p, eos, 0);
  EXPECT_FALSE(c.Append(2, "").finished());     // EOS as token 1
  EXPECT_FALSE(c.Append(5, "END").finished());  // stop string in token 2
  StopCheckResult r = c.Append(6, " and END");  // token 3 may stop
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(c.released_text(), "END and ");
}

}  // namespace
}  // namespace inferd
