// Length distributions of the inferd-bench load generator: how many tokens a
// prompt, an input or an output has. Parsed from "fixed:N", "uniform:MIN:MAX"
// or "normal:MEAN:STDDEV". Immutable after parsing; Sample() takes the
// caller's random generator, so one distribution can serve many threads.
#ifndef INFERD_BENCH_LOAD_LENGTH_DISTRIBUTION_H_
#define INFERD_BENCH_LOAD_LENGTH_DISTRIBUTION_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inferd::bench {

class LengthDistribution {
 public:
  enum class Kind { kFixed, kUniform, kNormal };

  // INVALID_ARGUMENT with the accepted forms when `spec` is malformed, a
  // length is < 1, or MIN > MAX.
  static absl::StatusOr<LengthDistribution> Parse(absl::string_view spec);
  static LengthDistribution Fixed(int64_t n);

  // A length >= 1; normal draws are rounded and clipped to [1, 4 * mean].
  int64_t Sample(std::mt19937_64& rng) const;

  // The largest length Sample() can return.
  int64_t Max() const;
  double Mean() const { return kind_ == Kind::kUniform ? (a_ + b_) / 2 : a_; }
  std::string ToString() const;

 private:
  LengthDistribution(Kind kind, double a, double b)
      : kind_(kind), a_(a), b_(b) {}

  Kind kind_;
  double a_;  // fixed: N; uniform: MIN; normal: MEAN
  double b_;  // uniform: MAX; normal: STDDEV
};

}  // namespace inferd::bench

#endif  // INFERD_BENCH_LOAD_LENGTH_DISTRIBUTION_H_
