#include "bench/load/length_distribution.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace inferd::bench {
namespace {

absl::Status Malformed(absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("length distribution '", spec, "': ", why,
                   " (use fixed:N, uniform:MIN:MAX or normal:MEAN:STDDEV)"));
}

}  // namespace

absl::StatusOr<LengthDistribution> LengthDistribution::Parse(
    absl::string_view spec) {
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  std::vector<double> values;
  for (size_t i = 1; i < parts.size(); ++i) {
    double v;
    if (!absl::SimpleAtod(parts[i], &v) || !std::isfinite(v)) {
      return Malformed(spec, absl::StrCat("'", parts[i], "' is not a number"));
    }
    values.push_back(v);
  }
  // A bare number means fixed.
  double bare;
  if (parts.size() == 1 && absl::SimpleAtod(parts[0], &bare)) {
    parts = {"fixed"};
    values = {bare};
  }
  const absl::string_view kind = parts[0];
  if (kind == "fixed" && values.size() == 1) {
    if (values[0] < 1) return Malformed(spec, "N must be >= 1");
    return LengthDistribution(Kind::kFixed, std::round(values[0]), 0);
  }
  if (kind == "uniform" && values.size() == 2) {
    if (values[0] < 1) return Malformed(spec, "MIN must be >= 1");
    if (values[0] > values[1]) return Malformed(spec, "MIN > MAX");
    return LengthDistribution(Kind::kUniform, std::round(values[0]),
                              std::round(values[1]));
  }
  if (kind == "normal" && values.size() == 2) {
    if (values[0] < 1) return Malformed(spec, "MEAN must be >= 1");
    if (values[1] < 0) return Malformed(spec, "STDDEV must be >= 0");
    return LengthDistribution(Kind::kNormal, values[0], values[1]);
  }
  return Malformed(spec, "unknown form");
}

LengthDistribution LengthDistribution::Fixed(int64_t n) {
  return LengthDistribution(Kind::kFixed, static_cast<double>(n), 0);
}

int64_t LengthDistribution::Sample(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::kFixed:
      return static_cast<int64_t>(a_);
    case Kind::kUniform:
      return std::uniform_int_distribution<int64_t>(
          static_cast<int64_t>(a_), static_cast<int64_t>(b_))(rng);
    case Kind::kNormal: {
      double v = std::round(std::normal_distribution<double>(a_, b_)(rng));
      return static_cast<int64_t>(
          std::clamp(v, 1.0, static_cast<double>(Max())));
    }
  }
  return 1;
}

int64_t LengthDistribution::Max() const {
  switch (kind_) {
    case Kind::kFixed:
      return static_cast<int64_t>(a_);
    case Kind::kUniform:
      return static_cast<int64_t>(b_);
    case Kind::kNormal:
      return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(4 * a_)));
  }
  return 1;
}

std::string LengthDistribution::ToString() const {
  switch (kind_) {
    case Kind::kFixed:
      return absl::StrCat("fixed:", a_);
    case Kind::kUniform:
      return absl::StrCat("uniform:", a_, ":", b_);
    case Kind::kNormal:
      return absl::StrCat("normal:", a_, ":", b_);
  }
  return "";
}

}  // namespace inferd::bench
