// Helpers for device tests: random tensors, an ISA-cap test parameter.
#ifndef INFERD_TESTS_DEVICE_TEST_UTIL_H_
#define INFERD_TESTS_DEVICE_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "device/bf16.h"
#include "device/cpu/cpu_features.h"
#include "device/tensor.h"
#include "gtest/gtest.h"

namespace inferd {
namespace testing_util {

inline std::vector<float> RandomVector(int64_t n, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FloatToBf16(v[i]);
  return out;
}

inline TensorView View2(float* data, int64_t rows, int64_t cols,
                        int64_t row_stride = -1) {
  TensorView t = TensorView::Contiguous(data, DType::kF32, {rows, cols});
  if (row_stride >= 0) t.strides[0] = row_stride;
  return t;
}

// Test parameter: the highest ISA the optimized kernels may use. At the
// avx512_bf16 level BF16-weight GEMMs are pinned to vdpbf16ps (whatever
// this CPU's measured preference), so that path is always covered; the
// widened path is the avx512 level's (and Bf16GemmPolicyTest's).
class IsaCapTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    saved_ = CpuIsaCap();
    saved_policy_ = GetBf16GemmPolicy();
    SetCpuIsaCap(GetParam());
    SetBf16GemmPolicy(Bf16GemmPolicy::kDot);
  }
  void TearDown() override {
    SetCpuIsaCap(saved_);
    SetBf16GemmPolicy(saved_policy_);
  }
  // True when the AVX512_BF16 kernels may run: vdpbf16ps for BF16 weights
  // (activations rounded to BF16) and the int8 prefill of block-quantized
  // weights.
  bool Bf16DotActive() const { return Bf16DotInUse(); }

 private:
  CpuIsa saved_ = CpuIsa::kAvx512Bf16;
  Bf16GemmPolicy saved_policy_ = Bf16GemmPolicy::kAuto;
};

inline std::string IsaParamName(const ::testing::TestParamInfo<CpuIsa>& info) {
  return std::string(CpuIsaName(info.param));
}

#define INFERD_ALL_ISAS                                              \
  ::testing::Values(::inferd::CpuIsa::kAvx512Bf16, ::inferd::CpuIsa::kAvx512, \
                    ::inferd::CpuIsa::kAvx2, ::inferd::CpuIsa::kScalar)

}  // namespace testing_util
}  // namespace inferd

#endif  // INFERD_TESTS_DEVICE_TEST_UTIL_H_
