// The int8 GEMM (LinearInt8, device/int8.h): the quantization rules' error
// bounds; optimized kernels (VNNI at avx512 and above when the CPU has it,
// portable below) equal to exact integer sums where quantization is exact
// and to the reference elsewhere; int8 vs F32 Linear within the stated
// tolerance; argument errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "device/int8.h"
#include "device/ops.h"
#include "gtest/gtest.h"
#include "tests/device/test_util.h"

namespace inferd {
namespace {

using testing_util::IsaCapTest;
using testing_util::RandomVector;
using testing_util::View2;

const ExecutionContext kOpt{nullptr, KernelChoice::kOptimized};
const ExecutionContext kRef{nullptr, KernelChoice::kReference};

TEST(Int8QuantTest, WeightRowsWithinHalfAStep) {
  const int64_t rows = 5, cols = 77;
  std::vector<float> w = RandomVector(rows * cols, 1, -3.0f, 2.0f);
  for (int64_t c = 0; c < cols; ++c) w[2 * cols + c] = 0.0f;  // all-zero row
  std::vector<int8_t> q(rows * cols);
  std::vector<float> s(rows);
  QuantizeWeightRowsInt8(w.data(), rows, cols, q.data(), s.data());
  EXPECT_EQ(s[2], 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
    if (r != 2) {
      EXPECT_FLOAT_EQ(s[r], amax / 127.0f);
    }
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_GE(q[r * cols + c], -127);
      EXPECT_LE(std::fabs(w[r * cols + c] - s[r] * q[r * cols + c]), 0.5f * s[r] * 1.0001f);
    }
  }
}

TEST(Int8QuantTest, ActivationRowAsymmetricWithExactZero) {
  for (const auto& range : {std::pair<float, float>{-1.0f, 3.0f}, {0.5f, 2.0f},
                            {-4.0f, -0.25f}}) {
    std::vector<float> x = RandomVector(100, 7, range.first, range.second);
    x[10] = 0.0f;
    std::vector<uint8_t> u(x.size());
    float s = 0.0f;
    int32_t z = -1;
    QuantizeActivationRowU8(x.data(), x.size(), u.data(), &s, &z);
    const float lo = std::min(0.0f, *std::min_element(x.begin(), x.end()));
    const float hi = std::max(0.0f, *std::max_element(x.begin(), x.end()));
    EXPECT_FLOAT_EQ(s, (hi - lo) / 255.0f);
    ASSERT_GE(z, 0);
    ASSERT_LE(z, 255);
    EXPECT_EQ(u[10], z);  // 0 is exact
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_LE(std::fabs(x[i] - s * (static_cast<int>(u[i]) - z)), 0.5f * s * 1.001f)
          << i;
    }
  }
  std::vector<float> zeros(9, 0.0f);
  std::vector<uint8_t> u(9, 7);
  float s = 0.0f;
  int32_t z = -1;
  QuantizeActivationRowU8(zeros.data(), 9, u.data(), &s, &z);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(z, 0);
  EXPECT_EQ(u[3], 0);
}

class LinearInt8Test : public IsaCapTest {};

struct Shape {
  int64_t m, n, k;
};
const Shape kShapes[] = {{1, 1, 1},    {7, 70, 13},  {13, 130, 256},
                         {100, 64, 64}, {6, 129, 5}, {37, 384, 384}};

// Integer activations spanning exactly [-128, 127] per row give s = 1 and
// z = 128, so with unit weight scales and no bias every output is the
// exact integer sum (below 2^24 here, so exact in F32 too).
TEST_P(LinearInt8Test, ExactIntegerSums) {
  for (const Shape& sh : kShapes) {
    if (sh.k < 2) continue;  // one value cannot span [-128, 127]
    std::mt19937 rng(static_cast<uint32_t>(sh.m * 31 + sh.n * 7 + sh.k));
    std::uniform_int_distribution<int> xd(-128, 127), wd(-127, 127);
    const int64_t ldx = sh.k + 3;  // a row stride wider than the row
    std::vector<float> x(sh.m * ldx, 0.0f);
    for (int64_t i = 0; i < sh.m; ++i) {
      for (int64_t p = 0; p < sh.k; ++p) x[i * ldx + p] = static_cast<float>(xd(rng));
      x[i * ldx] = -128.0f;
      x[i * ldx + sh.k - 1] = sh.k > 1 ? 127.0f : -128.0f;
    }
    std::vector<int8_t> w(sh.n * sh.k);
    for (int8_t& v : w) v = static_cast<int8_t>(wd(rng));
    std::vector<float> ones(sh.n, 1.0f), y(sh.m * sh.n, -1.0f), yr(sh.m * sh.n, -1.0f);
    const TensorView xv = View2(x.data(), sh.m, sh.k, ldx);
    const TensorView wv = TensorView::Contiguous(w.data(), DType::kI8, {sh.n, sh.k});
    const TensorView sv = TensorView::Contiguous(ones.data(), DType::kF32, {sh.n});
    ASSERT_TRUE(LinearInt8(kOpt, xv, wv, sv, TensorView{}, View2(y.data(), sh.m, sh.n)).ok());
    ASSERT_TRUE(LinearInt8(kRef, xv, wv, sv, TensorView{}, View2(yr.data(), sh.m, sh.n)).ok());
    for (int64_t i = 0; i < sh.m; ++i) {
      for (int64_t j = 0; j < sh.n; ++j) {
        int64_t want = 0;
        for (int64_t p = 0; p < sh.k; ++p) {
          want += static_cast<int64_t>(x[i * ldx + p]) * w[j * sh.k + p];
        }
        ASSERT_EQ(y[i * sh.n + j], static_cast<float>(want))
            << sh.m << "x" << sh.n << "x" << sh.k << " at " << i << "," << j;
        ASSERT_EQ(yr[i * sh.n + j], static_cast<float>(want));
      }
    }
  }
}

// Real-valued data: optimized == reference up to F32 rounding of the
// dequantization (1e-5 relative to the row's largest output), and int8 vs
// F32 Linear with the dequantized weights (only the activation rounding
// differs): max error <= 1% of the largest |output|.
TEST_P(LinearInt8Test, MatchesReferenceAndF32) {
  for (const Shape& sh : kShapes) {
    const uint32_t seed = static_cast<uint32_t>(sh.m + 100 * sh.n + sh.k);
    std::vector<float> x = RandomVector(sh.m * sh.k, seed, -1.5f, 2.5f);
    std::vector<float> wf = RandomVector(sh.n * sh.k, seed + 1, -0.5f, 0.5f);
    std::vector<float> bias = RandomVector(sh.n, seed + 2);
    std::vector<int8_t> w(sh.n * sh.k);
    std::vector<float> scale(sh.n);
    QuantizeWeightRowsInt8(wf.data(), sh.n, sh.k, w.data(), scale.data());
    std::vector<float> wdq(sh.n * sh.k);
    for (int64_t j = 0; j < sh.n; ++j) {
      for (int64_t p = 0; p < sh.k; ++p) wdq[j * sh.k + p] = scale[j] * w[j * sh.k + p];
    }
    std::vector<float> y(sh.m * sh.n), yr(sh.m * sh.n), yf(sh.m * sh.n);
    const TensorView xv = View2(x.data(), sh.m, sh.k);
    const TensorView wv = TensorView::Contiguous(w.data(), DType::kI8, {sh.n, sh.k});
    const TensorView sv = TensorView::Contiguous(scale.data(), DType::kF32, {sh.n});
    const TensorView bv = TensorView::Contiguous(bias.data(), DType::kF32, {sh.n});
    ASSERT_TRUE(LinearInt8(kOpt, xv, wv, sv, bv, View2(y.data(), sh.m, sh.n)).ok());
    ASSERT_TRUE(LinearInt8(kRef, xv, wv, sv, bv, View2(yr.data(), sh.m, sh.n)).ok());
    ASSERT_TRUE(Linear(kRef, xv, View2(wdq.data(), sh.n, sh.k), bv,
                       View2(yf.data(), sh.m, sh.n)).ok());
    for (int64_t i = 0; i < sh.m; ++i) {
      float big = 1e-6f;
      for (int64_t j = 0; j < sh.n; ++j) big = std::max(big, std::fabs(yf[i * sh.n + j]));
      for (int64_t j = 0; j < sh.n; ++j) {
        const int64_t at = i * sh.n + j;
        ASSERT_NEAR(y[at], yr[at], 1e-5f * big) << sh.m << "x" << sh.n << "x" << sh.k;
        ASSERT_NEAR(y[at], yf[at], 0.01f * big) << sh.m << "x" << sh.n << "x" << sh.k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, LinearInt8Test, INFERD_ALL_ISAS, testing_util::IsaParamName);

TEST(LinearInt8ArgsTest, RejectsWrongWeightDtypeAndScaleLength) {
  std::vector<float> x(2 * 4, 1.0f), y(2 * 3), wf(3 * 4), s(3, 1.0f);
  std::vector<int8_t> w(3 * 4, 1);
  const TensorView wv = TensorView::Contiguous(w.data(), DType::kI8, {3, 4});
  absl::Status st = LinearInt8(kOpt, View2(x.data(), 2, 4), View2(wf.data(), 3, 4),
                               TensorView::Contiguous(s.data(), DType::kF32, {3}),
                               TensorView{}, View2(y.data(), 2, 3));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("int8"), std::string::npos) << st.message();
  st = LinearInt8(kOpt, View2(x.data(), 2, 4), wv,
                  TensorView::Contiguous(s.data(), DType::kF32, {2}), TensorView{},
                  View2(y.data(), 2, 3));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  st = LinearInt8(kOpt, View2(x.data(), 2, 3), wv,
                  TensorView::Contiguous(s.data(), DType::kF32, {3}), TensorView{},
                  View2(y.data(), 2, 3));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd
