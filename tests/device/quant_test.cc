// Block-quantized dtypes: sizes and names, QuantizeRow -> DequantizeRow
// round trips within each format's bound, hand-built blocks, and the
// argument errors of the quantized ops. (Optimized vs reference Linear and
// Embedding on quantized weights: ops_test.cc, over every ISA level.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "device/bf16.h"
#include "device/ops.h"
#include "device/quant.h"
#include "gtest/gtest.h"
#include "tests/device/test_util.h"

namespace inferd {
namespace {

using testing_util::RandomVector;
using testing_util::View2;

const ExecutionContext kOpt{nullptr, KernelChoice::kOptimized};

float RoundF16(float v) { return F16ToFloat(FloatToF16(v)); }

TEST(QuantTest, BlockSizesNamesAndViewBytes) {
  struct Case {
    DType dtype;
    const char* name;
    int64_t elems;
    size_t bytes;
  };
  for (const Case& c : {Case{DType::kQ8_0, "q8_0", 32, 34}, Case{DType::kQ4_0, "q4_0", 32, 18},
                        Case{DType::kQ4_1, "q4_1", 32, 20}, Case{DType::kQ4_K, "q4_k", 256, 144},
                        Case{DType::kQ6_K, "q6_k", 256, 210}, Case{DType::kQ5_0, "q5_0", 32, 22},
                        Case{DType::kQ5_1, "q5_1", 32, 24}}) {
    EXPECT_TRUE(IsBlockQuantized(c.dtype));
    EXPECT_EQ(DTypeName(c.dtype), c.name);
    EXPECT_EQ(DTypeBlockElements(c.dtype), c.elems);
    EXPECT_EQ(DTypeBlockBytes(c.dtype), c.bytes);
    EXPECT_EQ(DTypeRowBytes(c.dtype, 4 * c.elems), 4 * c.bytes);
    const TensorView v = TensorView::Contiguous(nullptr, c.dtype, {3, 2 * c.elems});
    EXPECT_EQ(v.nbytes(), 6 * c.bytes);
    EXPECT_TRUE(v.is_contiguous());
  }
  EXPECT_FALSE(IsBlockQuantized(DType::kF16));
  EXPECT_EQ(DTypeBlockElements(DType::kBF16), 1);
  EXPECT_EQ(DTypeRowBytes(DType::kF16, 7), 14u);
  EXPECT_EQ(TensorView::Contiguous(nullptr, DType::kF32, {3, 5}).nbytes(), 60u);
}

// Each block of x against its decoded values: |err| <= bound(block, j).
template <typename Bound>
void CheckRoundTrip(DType dtype, const std::vector<float>& x, Bound bound) {
  const int64_t n = x.size(), block = DTypeBlockElements(dtype);
  std::vector<uint8_t> q(DTypeRowBytes(dtype, n));
  std::vector<float> y(n);
  ASSERT_TRUE(QuantizeRow(dtype, x.data(), n, q.data()).ok());
  ASSERT_TRUE(DequantizeRow(dtype, q.data(), n, y.data()).ok());
  for (int64_t b = 0; b < n; b += block) {
    for (int64_t j = 0; j < block; ++j) {
      ASSERT_LE(std::fabs(y[b + j] - x[b + j]), bound(&x[b], j))
          << DTypeName(dtype) << " block " << b / block << " value " << j << ": " << x[b + j]
          << " -> " << y[b + j];
    }
  }
}

std::vector<float> TestValues(int64_t n, uint32_t seed) {
  std::vector<float> x = RandomVector(n, seed, -2.0f, 2.0f);
  for (int64_t i = 0; i < 32; ++i) x[i] = 0.0f;               // an all-zero block
  for (int64_t i = 32; i < 64; ++i) x[i] = 0.5f + 1e-3f * i;  // all positive
  for (int64_t i = 64; i < 96; ++i) x[i] = -3.0f * (i % 5);   // non-positive
  return x;
}

TEST(QuantTest, Q8_0RoundTripWithinHalfAStep) {
  // d = max|x| / 127 is stored as f16: |err| <= d/2 + 127 |d - f16(d)|.
  CheckRoundTrip(DType::kQ8_0, TestValues(32 * 64, 1), [](const float* b, int64_t) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(b[j]));
    const float d = amax / 127;
    return d / 2 + 127 * std::fabs(d - RoundF16(d)) + 1e-7f * amax;
  });
}

TEST(QuantTest, Q4_0RoundTripWithinHalfAStep) {
  // d = max / -8 (max: the value of largest magnitude, decoding exactly to
  // -8 d); values of the other sign above 7.5 |d| clamp to q = 15: |err|
  // <= |d| there, else |d|/2, plus 8 |d - f16(d)|.
  CheckRoundTrip(DType::kQ4_0, TestValues(32 * 64, 2), [](const float* b, int64_t j) {
    float amax = 0, max = 0;
    for (int i = 0; i < 32; ++i) {
      if (std::fabs(b[i]) > amax) {
        amax = std::fabs(b[i]);
        max = b[i];
      }
    }
    const float d = max / -8;
    const bool clamped = d != 0 && b[j] / d > 7.5f;
    return std::fabs(d) * (clamped ? 1.0f : 0.5f) + 8 * std::fabs(d - RoundF16(d)) +
           1e-6f * amax;
  });
}

TEST(QuantTest, Q4_1RoundTripWithinHalfAStep) {
  // d = (max - min) / 15, m = min, both stored as f16.
  CheckRoundTrip(DType::kQ4_1, TestValues(32 * 64, 3), [](const float* b, int64_t) {
    const float mn = *std::min_element(b, b + 32), mx = *std::max_element(b, b + 32);
    const float d = (mx - mn) / 15;
    return d / 2 + 15 * std::fabs(d - RoundF16(d)) + std::fabs(mn - RoundF16(mn)) +
           1e-6f * (std::fabs(mn) + std::fabs(mx));
  });
}

TEST(QuantTest, Q5RoundTripWithinHalfAStep) {
  // Q5_0 as Q4_0 with 32 levels: d = max / -16 (the value of largest
  // magnitude decodes to -16 d), values of the other sign above 15.5 |d|
  // clamp to q = 31; plus 16 |d - f16(d)|.
  CheckRoundTrip(DType::kQ5_0, TestValues(32 * 64, 6), [](const float* b, int64_t j) {
    float amax = 0, max = 0;
    for (int i = 0; i < 32; ++i) {
      if (std::fabs(b[i]) > amax) {
        amax = std::fabs(b[i]);
        max = b[i];
      }
    }
    const float d = max / -16;
    const bool clamped = d != 0 && b[j] / d > 15.5f;
    return std::fabs(d) * (clamped ? 1.0f : 0.5f) + 16 * std::fabs(d - RoundF16(d)) +
           1e-6f * amax;
  });
  // Q5_1 as Q4_1: d = (max - min) / 31, m = min.
  CheckRoundTrip(DType::kQ5_1, TestValues(32 * 64, 7), [](const float* b, int64_t) {
    const float mn = *std::min_element(b, b + 32), mx = *std::max_element(b, b + 32);
    const float d = (mx - mn) / 31;
    return d / 2 + 31 * std::fabs(d - RoundF16(d)) + std::fabs(mn - RoundF16(mn)) +
           1e-6f * (std::fabs(mn) + std::fabs(mx));
  });
}

TEST(QuantTest, KQuantsRoundTripWithinOneStep) {
  // inferd's simple K-quant encoders (no scale search): within one step of
  // the sub-block (6-bit scales can round the step down, clamping the
  // extremes), i.e. range / 15 for Q4_K's 32-value sub-blocks and
  // max|x| / 31 for Q6_K's 16-value ones, plus the 6/8-bit scale rounding.
  CheckRoundTrip(DType::kQ4_K, TestValues(256 * 8, 4), [](const float* b, int64_t j) {
    const float* s = b + j / 32 * 32;
    const float lo = std::min(0.0f, *std::min_element(s, s + 32)), hi = *std::max_element(s, s + 32);
    float bmax = 0;
    for (int i = 0; i < 256; ++i) bmax = std::max(bmax, std::fabs(b[i]));
    return (hi - lo) / 15 + bmax / 63 + 1e-6f;
  });
  CheckRoundTrip(DType::kQ6_K, TestValues(256 * 8, 5), [](const float* b, int64_t j) {
    const float* s = b + j / 16 * 16;
    float amax = 0, bmax = 0;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(s[i]));
    for (int i = 0; i < 256; ++i) bmax = std::max(bmax, std::fabs(b[i]));
    return amax / 31 + bmax / 127 + 1e-6f;
  });
}

TEST(QuantTest, DecodesHandBuiltBlocks) {
  // Q4_1: d = 0.5, m = -1; byte j = (j % 16) | (15 - j % 16) << 4.
  uint8_t q41[20];
  const uint16_t d = FloatToF16(0.5f), m = FloatToF16(-1.0f);
  std::memcpy(q41, &d, 2);
  std::memcpy(q41 + 2, &m, 2);
  for (int j = 0; j < 16; ++j) q41[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[256];
  ASSERT_TRUE(DequantizeRow(DType::kQ4_1, q41, 32, y).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j - 1.0f);
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j) - 1.0f);
  }
  // Q8_0: d = 0.25, q = j - 16.
  uint8_t q80[34];
  const uint16_t d8 = FloatToF16(0.25f);
  std::memcpy(q80, &d8, 2);
  for (int j = 0; j < 32; ++j) q80[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  ASSERT_TRUE(DequantizeRow(DType::kQ8_0, q80, 32, y).ok());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.25f * (j - 16));
  // Q4_K: d = 1, dmin = 0.5, sub-block s has scale s + 1 and min s (the
  // high 2 bits of scales/mins 4..7 live in bytes 0..7), all q = 3.
  uint8_t q4k[144] = {};
  const uint16_t one = FloatToF16(1.0f), half = FloatToF16(0.5f);
  std::memcpy(q4k, &one, 2);
  std::memcpy(q4k + 2, &half, 2);
  int sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = s + 1 + (s >= 4 ? 32 : 0);  // sub-blocks 4..7 use the high bits
    mn[s] = s + (s >= 4 ? 16 : 0);
  }
  for (int j = 0; j < 4; ++j) {
    q4k[4 + j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    q4k[8 + j] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    q4k[12 + j] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  std::memset(q4k + 16, 0x33, 128);
  ASSERT_TRUE(DequantizeRow(DType::kQ4_K, q4k, 256, y).ok());
  for (int v = 0; v < 256; ++v) EXPECT_EQ(y[v], 3.0f * sc[v / 32] - 0.5f * mn[v / 32]) << v;
}

TEST(QuantTest, RowErrorsAreInvalidArgument) {
  std::vector<float> x(64);
  std::vector<uint8_t> q(256);
  EXPECT_EQ(QuantizeRow(DType::kQ4_0, x.data(), 33, q.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(DType::kQ4_K, q.data(), 64, x.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(DType::kI32, q.data(), 4, x.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(QuantTest, OpShapeAndDtypeErrorsAreInvalidArgument) {
  std::vector<float> x(4 * 64), y(4 * 8);
  std::vector<uint8_t> w(8 * 2 * 144);
  // K not a multiple of the block.
  EXPECT_EQ(Linear(kOpt, View2(x.data(), 4, 48), TensorView::Contiguous(w.data(), DType::kQ4_0, {8, 48}),
                   TensorView{}, View2(y.data(), 4, 8)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Linear(kOpt, View2(x.data(), 1, 64), TensorView::Contiguous(w.data(), DType::kQ4_K, {8, 64}),
                   TensorView{}, View2(y.data(), 1, 8)).code(),
            absl::StatusCode::kInvalidArgument);
  // x's K differs from the weight's.
  EXPECT_EQ(Linear(kOpt, View2(x.data(), 2, 32), TensorView::Contiguous(w.data(), DType::kQ8_0, {8, 64}),
                   TensorView{}, View2(y.data(), 2, 8)).code(),
            absl::StatusCode::kInvalidArgument);
  // Not 2-D, not contiguous.
  EXPECT_EQ(Linear(kOpt, View2(x.data(), 1, 64), TensorView::Contiguous(w.data(), DType::kQ8_0, {64}),
                   TensorView{}, View2(y.data(), 1, 8)).code(),
            absl::StatusCode::kInvalidArgument);
  TensorView strided = TensorView::Contiguous(w.data(), DType::kQ8_0, {4, 32});
  strided.strides[0] = 64;
  EXPECT_EQ(Linear(kOpt, View2(x.data(), 1, 32), strided, TensorView{}, View2(y.data(), 1, 4)).code(),
            absl::StatusCode::kInvalidArgument);
  // Embedding: H not a multiple of the block; a weight dtype an op cannot read.
  std::vector<int32_t> ids = {0};
  const TensorView idv = TensorView::Contiguous(ids.data(), DType::kI32, {1});
  EXPECT_EQ(Embedding(kOpt, TensorView::Contiguous(w.data(), DType::kQ4_1, {4, 40}), idv,
                      View2(x.data(), 1, 40)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Embedding(kOpt, TensorView::Contiguous(w.data(), DType::kI8, {4, 32}), idv,
                      View2(x.data(), 1, 32)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Linear(kOpt, View2(x.data(), 1, 32), TensorView::Contiguous(w.data(), DType::kU8, {4, 32}),
                   TensorView{}, View2(y.data(), 1, 4)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd
