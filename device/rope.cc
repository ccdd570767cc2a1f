// RopeCache: RoPE inverse frequencies with the scaling variants of HF
// transformers (linear, dynamic NTK, Llama 3, YaRN, LongRoPE) and llama.cpp's
// per-dimension frequency factors.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "device/ops.h"

namespace inferd {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<double> BaseInvFreq(double theta, int dim) {
  std::vector<double> f(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    f[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / dim);
  }
  return f;
}

double YarnMscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

// Dimension index whose wavelength makes `num_rotations` turns over
// `max_pos` positions (YaRN).
double YarnCorrectionDim(double num_rotations, int dim, double base,
                         double max_pos) {
  return (dim * std::log(max_pos / (num_rotations * 2 * kPi))) /
         (2 * std::log(base));
}

}  // namespace

absl::StatusOr<RopeCache> RopeCache::Create(const RopeConfig& input) {
  RopeConfig config = input;
  if (config.rotary_dim == 0) config.rotary_dim = config.head_dim;
  const int dim = config.rotary_dim;
  if (config.head_dim <= 0 || dim <= 0 || dim % 2 != 0 ||
      dim > config.head_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("RoPE: bad head_dim ", config.head_dim, " / rotary_dim ",
                     config.rotary_dim));
  }
  if (!(config.theta > 0)) {
    return absl::InvalidArgumentError("RoPE: theta must be > 0");
  }
  const RopeScaling& s = config.scaling;
  if (s.type != RopeScalingType::kNone && !(s.factor > 0)) {
    return absl::InvalidArgumentError("RoPE: scaling factor must be > 0");
  }
  const double original_max = s.original_max_position_embeddings > 0
                                   ? s.original_max_position_embeddings
                                   : config.max_position_embeddings;
  if (original_max <= 0 &&
      (s.type == RopeScalingType::kLlama3 || s.type == RopeScalingType::kYarn ||
       s.type == RopeScalingType::kDynamicNtk ||
       s.type == RopeScalingType::kLongRope)) {
    return absl::InvalidArgumentError(
        "RoPE: scaling needs (original_)max_position_embeddings");
  }
  // Per-dimension divisors: one per rotated pair, finite and positive.
  auto check_factors = [&](const std::vector<double>& f,
                           const char* what) -> absl::Status {
    if (static_cast<int>(f.size()) != dim / 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("RoPE: ", what, " has ", f.size(),
                       " values; rotary_dim / 2 is ", dim / 2));
    }
    for (double x : f) {
      if (!(x > 0) || !std::isfinite(x)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "RoPE: ", what, " values must be finite and > 0, got ", x));
      }
    }
    return absl::OkStatus();
  };
  if (!s.freq_factors.empty()) {
    absl::Status st = check_factors(s.freq_factors, "freq_factors");
    if (!st.ok()) return st;
  }
  if (s.type == RopeScalingType::kLongRope) {
    absl::Status st = check_factors(s.short_factors, "longrope short_factor");
    if (st.ok()) st = check_factors(s.long_factors, "longrope long_factor");
    if (!st.ok()) return st;
  }

  RopeCache cache;
  std::vector<double> inv = BaseInvFreq(config.theta, dim);
  double attention_factor = 1.0;
  switch (s.type) {
    case RopeScalingType::kNone:
    case RopeScalingType::kDynamicNtk:  // computed per call in InvFreq()
      break;
    case RopeScalingType::kLinear:
      for (double& f : inv) f /= s.factor;
      break;
    case RopeScalingType::kLlama3: {
      if (!(s.high_freq_factor > s.low_freq_factor)) {
        return absl::InvalidArgumentError(
            "RoPE llama3: high_freq_factor must exceed low_freq_factor");
      }
      const double low_freq_wavelen = original_max / s.low_freq_factor;
      const double high_freq_wavelen = original_max / s.high_freq_factor;
      for (double& f : inv) {
        const double wavelen = 2 * kPi / f;
        if (wavelen > low_freq_wavelen) {
          f /= s.factor;  // low frequencies: fully interpolated
        } else if (wavelen >= high_freq_wavelen) {
          const double smooth = (original_max / wavelen - s.low_freq_factor) /
                                (s.high_freq_factor - s.low_freq_factor);
          f = (1 - smooth) * f / s.factor + smooth * f;
        }  // high frequencies unchanged
      }
      break;
    }
    case RopeScalingType::kYarn: {
      if (s.attention_factor > 0) {
        attention_factor = s.attention_factor;
      } else if (s.mscale > 0 && s.mscale_all_dim > 0) {
        attention_factor = YarnMscale(s.factor, s.mscale) /
                           YarnMscale(s.factor, s.mscale_all_dim);
      } else {
        attention_factor = YarnMscale(s.factor, 1.0);
      }
      double low = YarnCorrectionDim(s.beta_fast, dim, config.theta,
                                     original_max);
      double high = YarnCorrectionDim(s.beta_slow, dim, config.theta,
                                      original_max);
      if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(dim - 1));
      if (low == high) high += 0.001;
      for (int i = 0; i < dim / 2; ++i) {
        const double ramp =
            std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double extrapolation_factor = 1.0 - ramp;
        const double extrapolated = inv[i];
        const double interpolated = inv[i] / s.factor;
        inv[i] = interpolated * (1 - extrapolation_factor) +
                 extrapolated * extrapolation_factor;
      }
      break;
    }
    case RopeScalingType::kLongRope: {
      if (s.attention_factor > 0) {
        attention_factor = s.attention_factor;
      } else if (s.factor > 1.0) {
        attention_factor =
            std::sqrt(1.0 + std::log(s.factor) / std::log(original_max));
      }
      std::vector<double> long_inv = inv;
      for (int i = 0; i < dim / 2; ++i) {
        inv[i] /= s.short_factors[i];
        long_inv[i] /= s.long_factors[i];
      }
      cache.long_inv_freq_.assign(long_inv.begin(), long_inv.end());
      break;
    }
  }
  if (!s.freq_factors.empty()) {
    for (int i = 0; i < dim / 2; ++i) inv[i] /= s.freq_factors[i];
  }
  cache.config_ = config;
  cache.inv_freq_.assign(inv.begin(), inv.end());
  cache.attention_factor_ = static_cast<float>(attention_factor);
  return cache;
}

std::vector<float> RopeCache::InvFreq(int64_t seq_len) const {
  const RopeScaling& s = config_.scaling;
  const double max_pos = s.original_max_position_embeddings > 0
                             ? s.original_max_position_embeddings
                             : config_.max_position_embeddings;
  if (s.type == RopeScalingType::kLongRope) {
    return static_cast<double>(seq_len) > max_pos ? long_inv_freq_ : inv_freq_;
  }
  if (s.type != RopeScalingType::kDynamicNtk) return inv_freq_;
  const double len = std::max<double>(static_cast<double>(seq_len), max_pos);
  const int dim = config_.rotary_dim;
  const double base =
      config_.theta * std::pow(s.factor * len / max_pos - (s.factor - 1),
                               static_cast<double>(dim) / (dim - 2));
  std::vector<double> inv = BaseInvFreq(base, dim);
  if (!s.freq_factors.empty()) {
    for (int i = 0; i < dim / 2; ++i) inv[i] /= s.freq_factors[i];
  }
  return std::vector<float>(inv.begin(), inv.end());
}

absl::Status RopeCache::ComputeCosSin(absl::Span<const int32_t> positions,
                                      std::vector<float>* cos_sin) const {
  const int half = config_.rotary_dim / 2;
  int32_t max_pos = -1;
  for (int32_t p : positions) {
    if (p < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("RoPE: negative position ", p));
    }
    max_pos = std::max(max_pos, p);
  }
  const RopeScalingType type = config_.scaling.type;
  const std::vector<float> inv =
      type == RopeScalingType::kDynamicNtk || type == RopeScalingType::kLongRope
          ? InvFreq(int64_t{max_pos} + 1)
          : inv_freq_;
  cos_sin->resize(positions.size() * 2 * half);
  for (size_t t = 0; t < positions.size(); ++t) {
    float* c = cos_sin->data() + t * 2 * half;
    float* sn = c + half;
    const float p = static_cast<float>(positions[t]);
    for (int i = 0; i < half; ++i) {
      // The angle is rounded to float like the reference (float32) models;
      // cos/sin are then evaluated in double for accuracy.
      const float angle = p * inv[i];
      c[i] = static_cast<float>(std::cos(static_cast<double>(angle))) *
             attention_factor_;
      sn[i] = static_cast<float>(std::sin(static_cast<double>(angle))) *
              attention_factor_;
    }
  }
  return absl::OkStatus();
}

}  // namespace inferd
