// Unit tests of inferd-bench's length distributions and latency summaries.
#include <random>
#include <vector>

#include "bench/load/latency_stats.h"
#include "bench/load/length_distribution.h"
#include "gtest/gtest.h"

namespace inferd::bench {
namespace {

TEST(LengthDistributionTest, FixedAlwaysReturnsN) {
  auto d = LengthDistribution::Parse("fixed:128");
  ASSERT_TRUE(d.ok()) << d.status();
  std::mt19937_64 rng(1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d->Sample(rng), 128);
  EXPECT_EQ(d->Max(), 128);
}

TEST(LengthDistributionTest, BareNumberMeansFixed) {
  auto d = LengthDistribution::Parse("42");
  ASSERT_TRUE(d.ok()) << d.status();
  std::mt19937_64 rng(1);
  EXPECT_EQ(d->Sample(rng), 42);
}

TEST(LengthDistributionTest, UniformStaysWithinBoundsAndCoversThem) {
  auto d = LengthDistribution::Parse("uniform:10:13");
  ASSERT_TRUE(d.ok()) << d.status();
  std::mt19937_64 rng(7);
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 2000; ++i) {
    int64_t v = d->Sample(rng);
    ASSERT_GE(v, 10);
    ASSERT_LE(v, 13);
    ++seen[v - 10];
  }
  for (int count : seen) EXPECT_GT(count, 0);
  EXPECT_DOUBLE_EQ(d->Mean(), 11.5);
}

TEST(LengthDistributionTest, NormalIsClippedToAtLeastOne) {
  auto d = LengthDistribution::Parse("normal:3:50");
  ASSERT_TRUE(d.ok()) << d.status();
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    int64_t v = d->Sample(rng);
    ASSERT_GE(v, 1);
    ASSERT_LE(v, d->Max());
  }
}

TEST(LengthDistributionTest, NormalSampleMeanIsNearTheMean) {
  auto d = LengthDistribution::Parse("normal:200:20");
  ASSERT_TRUE(d.ok()) << d.status();
  std::mt19937_64 rng(5);
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(d->Sample(rng));
  EXPECT_NEAR(sum / n, 200.0, 1.0);
}

TEST(LengthDistributionTest, RejectsMalformedSpecs) {
  for (const char* spec :
       {"", "fixed", "fixed:0", "uniform:5", "uniform:9:3", "normal:10",
        "normal:10:-1", "poisson:3", "fixed:abc", "uniform:0:4"}) {
    auto d = LengthDistribution::Parse(spec);
    EXPECT_FALSE(d.ok()) << spec;
    if (!d.ok()) {
      EXPECT_NE(d.status().message().find("fixed:N"), absl::string_view::npos)
          << d.status();
    }
  }
}

TEST(LatencyStatsTest, PercentilesInterpolateBetweenRanks) {
  std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_NEAR(Percentile(v, 90), 3.7, 1e-12);
}

TEST(LatencyStatsTest, SummarizeSortsAndAverages) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  Summary s = Summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.p50, 50.5);
  EXPECT_NEAR(s.p90, 90.1, 1e-9);
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
}

TEST(LatencyStatsTest, EmptyAndSingleSamples) {
  Summary empty = Summarize({});
  EXPECT_EQ(empty.count, 0u);
  EXPECT_EQ(empty.p99, 0);
  Summary one = Summarize({7.5});
  EXPECT_EQ(one.count, 1u);
  EXPECT_EQ(one.p50, 7.5);
  EXPECT_EQ(one.p99, 7.5);
}

}  // namespace
}  // namespace inferd::bench
