// Summary statistics of a sample of latencies (or any values) for the
// inferd-bench report: count, mean, min, max and percentiles by linear
// interpolation between closest ranks. Pure functions; thread-compatible.
#ifndef INFERD_BENCH_LOAD_LATENCY_STATS_H_
#define INFERD_BENCH_LOAD_LATENCY_STATS_H_

#include <cstddef>
#include <vector>

namespace inferd::bench {

struct Summary {
  size_t count = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
};

// The q-th percentile (q in [0, 100]) of `sorted` (ascending, non-empty),
// interpolated linearly between the two closest ranks.
double Percentile(const std::vector<double>& sorted, double q);

// Every field is 0 when `values` is empty.
Summary Summarize(std::vector<double> values);

}  // namespace inferd::bench

#endif  // INFERD_BENCH_LOAD_LATENCY_STATS_H_
