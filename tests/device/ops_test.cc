// Optimized CPU ops vs the reference kernels and vs direct formulas, for every
// ISA level the machine supports (capped via SetCpuIsaCap).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "device/ops.h"
#include "device/bf16.h"
#include "device/quant.h"
#include "gtest/gtest.h"
#include "tests/device/test_util.h"

namespace inferd {
namespace {

using testing_util::IsaCapTest;
using testing_util::RandomVector;
using testing_util::ToBf16;
using testing_util::View2;

const ExecutionContext kOpt{nullptr, KernelChoice::kOptimized};
const ExecutionContext kRef{nullptr, KernelChoice::kReference};

class LinearTest : public IsaCapTest {};

// Linear vs reference over odd shapes; tolerance scales with sum |x||w|:
// F32 accumulation 1e-5 relative; the vdpbf16ps path rounds activations to
// BF16 (2^-8 relative per product).
TEST_P(LinearTest, MatchesReferenceForF32AndBf16Weights) {
  uint32_t seed = 1;
  for (int64_t m : {1, 7, 9, 16, 17, 20, 31, 33, 64, 65, 130}) {
    for (int64_t n : {1, 3, 17, 33, 129}) {
      for (int64_t k : {1, 3, 17, 33, 129, 1000}) {
        for (bool bf16 : {false, true}) {
          const int64_t ldx = k + (m % 2);  // odd M: padded rows
          std::vector<float> x = RandomVector(m * ldx, seed++);
          std::vector<float> w = RandomVector(n * k, seed++);
          std::vector<float> bias = RandomVector(n, seed++);
          std::vector<uint16_t> w16 = ToBf16(w);
          if (bf16) {
            for (int64_t i = 0; i < n * k; ++i) w[i] = Bf16ToFloat(w16[i]);
          }
          TensorView wv = bf16 ? TensorView::Contiguous(w16.data(), DType::kBF16, {n, k})
                               : TensorView::Contiguous(w.data(), DType::kF32, {n, k});
          TensorView bv = TensorView::Contiguous(bias.data(), DType::kF32, {n});
          const bool use_bias = (n + k) % 2 == 0;
          std::vector<float> y(m * n), y_ref(m * n);
          ASSERT_TRUE(Linear(kOpt, View2(x.data(), m, k, ldx), wv,
                             use_bias ? bv : TensorView{}, View2(y.data(), m, n))
                          .ok());
          ASSERT_TRUE(Linear(kRef, View2(x.data(), m, k, ldx), wv,
                             use_bias ? bv : TensorView{}, View2(y_ref.data(), m, n))
                          .ok());
          const double rel = (bf16 && Bf16DotActive()) ? 8e-3 : 1e-5;
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double mag = 0;
              for (int64_t p = 0; p < k; ++p) mag += std::fabs(x[i * ldx + p] * w[j * k + p]);
              ASSERT_NEAR(y[i * n + j], y_ref[i * n + j], rel * mag + 1e-6)
                  << "m=" << m << " n=" << n << " k=" << k << " bf16=" << bf16
                  << " at (" << i << "," << j << ")";
            }
          }
        }
      }
    }
  }
}

// Random weights for a quantized (or F16) dtype: random floats through
// QuantizeRow; for the K-quants half the rows are random bytes with small
// f16 scales instead, so every packed scale bit is exercised.
std::vector<uint8_t> RandomWeights(DType dtype, int64_t n, int64_t k,
                                   uint32_t seed) {
  const size_t row_bytes = DTypeRowBytes(dtype, k);
  std::vector<uint8_t> w(n * row_bytes);
  std::vector<float> src = RandomVector(n * k, seed);
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_TRUE(QuantizeRow(dtype, src.data() + r * k, k, w.data() + r * row_bytes).ok());
  }
  if (dtype == DType::kQ4_K || dtype == DType::kQ6_K) {
    std::mt19937 rng(seed);
    const size_t bb = DTypeBlockBytes(dtype);
    for (int64_t r = 0; r < n; r += 2) {
      uint8_t* row = w.data() + r * row_bytes;
      for (size_t i = 0; i < row_bytes; ++i) row[i] = static_cast<uint8_t>(rng());
      for (size_t b = 0; b < row_bytes; b += bb) {
        const uint16_t d = FloatToF16(0.01f), dmin = FloatToF16(0.02f);
        if (dtype == DType::kQ4_K) {
          std::memcpy(row + b, &d, 2);
          std::memcpy(row + b + 2, &dmin, 2);
        } else {
          std::memcpy(row + b + 208, &d, 2);
        }
      }
    }
  }
  return w;
}

// Quantized and F16 weights, optimized vs reference (which decodes each row
// with DequantizeRow and accumulates in double); every M regime (GEMV,
// small M, decoded tiles), N and K not multiples of the kernels' blocking.
// Tolerance 1e-5 relative to sum |x| (|w| + |block offset|): the kernels
// accumulate d * sum(x q) + m * sum(x) in F32, whose terms can exceed |w|.
// Above M = 64 (and from M = 8 on in a decode-only step,
// ExecutionContext::decode_rows) at the avx512_bf16 level the
// block-quantized formats quantize x per block of 32 to int8 (step dx = the
// block's max |x| / 127) for vpdpbusd: plus sum |w| dx / 2 (the rounding of x),
// with 1e-3 of slack. At M = 1 Q4_0, Q4_1 and Q8_0 run int8 dot products on x
// quantized to 16 bits per block of 32 (two int8 levels, step dx = the block's
// max |x| / 32512): the same bound with that step.
TEST_P(LinearTest, MatchesReferenceForQuantizedAndF16Weights) {
  uint32_t seed = 100;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                      DType::kQ4_K, DType::kQ6_K, DType::kF16}) {
    const int64_t block = DTypeBlockElements(dtype);
    std::vector<int64_t> ks;
    if (block == 1) {
      ks = {1, 17, 129, 1000};
    } else if (block == 32) {
      // 1, 3, 9, 33 blocks; 70: past the AVX-512 GEMV's 64-block scale
      // chunk.
      ks = {32, 96, 288, 1056, 2240};
    } else {
      ks = {256, 768, 2304};
    }
    for (int64_t m : {1, 2, 3, 7, 16, 33, 64, 65, 130}) {
      // 67: 2 panels of 32 rows + 3; 40: a second panel half empty.
      for (int64_t n : {1, 5, 17, 40, 67}) {
        for (int64_t k : ks) {
          for (bool decode_rows : {false, true}) {
            ExecutionContext ctx = kOpt;
            ctx.decode_rows = decode_rows;
            const int64_t ldx = k + (m % 2);
            std::vector<float> x = RandomVector(m * ldx, seed++);
            std::vector<uint8_t> w = RandomWeights(dtype, n, k, seed++);
            std::vector<float> bias = RandomVector(n, seed++);
            std::vector<float> wf(n * k);
            const size_t row_bytes = DTypeRowBytes(dtype, k);
            for (int64_t r = 0; r < n; ++r) {
              ASSERT_TRUE(DequantizeRow(dtype, w.data() + r * row_bytes, k,
                                        wf.data() + r * k)
                              .ok());
            }
            // |block offset| per value: Q4_1 m, Q4_K dmin * min (from the
            // dequantized value of q = 0 is not available; bound by the
            // block's largest |w|).
            std::vector<float> off(n * k, 0.0f);
            if (dtype == DType::kQ4_1 || dtype == DType::kQ5_1 || dtype == DType::kQ4_K) {
              for (int64_t r = 0; r < n; ++r) {
                for (int64_t b = 0; b < k; b += 32) {
                  float mx = 0;
                  for (int j = 0; j < 32; ++j)
                    mx = std::max(mx, std::fabs(wf[r * k + b + j]));
                  for (int j = 0; j < 32; ++j) off[r * k + b + j] = mx;
                }
              }
            }
            const TensorView wv =
                TensorView::Contiguous(w.data(), dtype, {n, k});
            const TensorView bv =
                TensorView::Contiguous(bias.data(), DType::kF32, {n});
            const bool use_bias = (m + n) % 2 == 0;
            std::vector<float> y(m * n), y_ref(m * n);
            ASSERT_TRUE(Linear(ctx, View2(x.data(), m, k, ldx), wv,
                               use_bias ? bv : TensorView{},
                               View2(y.data(), m, n))
                            .ok());
            ASSERT_TRUE(Linear(kRef, View2(x.data(), m, k, ldx), wv,
                               use_bias ? bv : TensorView{},
                               View2(y_ref.data(), m, n))
                            .ok());
            const bool int8_x = (m > 64 || (decode_rows && m >= 8)) &&
                                Bf16DotActive() && dtype != DType::kF16;
            const bool int16_x =
                m == 1 && Bf16DotActive() && dtype != DType::kF16;
            const double levels = int8_x ? 127.0 : 32512.0;
            // x blocks: 32 values, but a K-quant super-block (256) for the
            // 16-bit GEMV.
            const int64_t xblock = int16_x ? block : 32;
            for (int64_t i = 0; i < m; ++i) {
              // Half the quantization step of each block of x row i.
              std::vector<double> half_step(k / xblock + 1, 0.0);
              if (int8_x || int16_x) {
                for (int64_t p = 0; p < k; ++p) {
                  half_step[p / xblock] =
                      std::max(half_step[p / xblock],
                               std::fabs(x[i * ldx + p]) / levels / 2.0);
                }
              }
              for (int64_t j = 0; j < n; ++j) {
                double mag = 0, rounding = 0;
                for (int64_t p = 0; p < k; ++p) {
                  mag += std::fabs(x[i * ldx + p]) *
                         (std::fabs(wf[j * k + p]) + off[j * k + p]);
                  rounding += std::fabs(wf[j * k + p]) * half_step[p / xblock];
                }
                ASSERT_NEAR(y[i * n + j], y_ref[i * n + j],
                            1e-5 * mag + 1.001 * rounding + 1e-6)
                    << DTypeName(dtype) << " m=" << m << " n=" << n
                    << " k=" << k << " at (" << i << "," << j << ")";
              }
            }
          }
        }
      }
    }
  }
}

// |offset| a block-quantized value's dequantization adds to d q, for value
// p of the row at `row` (the magnitude the kernels' F32 sums carry beside
// |w|): Q4_0 8 d, Q5_0 16 d, Q4_1 and Q5_1 |m|, Q8_0 128 d (the int8
// kernels fold it in), Q4_K
// dmin m of the value's sub-block, Q6_K 32 |d sc| of its group of 16.
double BlockOffset(DType dtype, const uint8_t* row, int64_t p) {
  const uint8_t* blk = row + (p / DTypeBlockElements(dtype)) * DTypeBlockBytes(dtype);
  auto half = [&](int at) {
    uint16_t h;
    std::memcpy(&h, blk + at, 2);
    return std::fabs(static_cast<double>(F16ToFloat(h)));
  };
  switch (dtype) {
    case DType::kQ4_0: return 8.0 * half(0);
    case DType::kQ4_1:
    case DType::kQ5_1: return half(2);
    case DType::kQ5_0: return 16.0 * half(0);
    case DType::kQ8_0: return 128.0 * half(0);
    case DType::kQ4_K: {
      const uint8_t* q = blk + 4;
      const int j = static_cast<int>(p % 256) / 32;
      const int m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
      return half(2) * m;
    }
    case DType::kQ6_K: {
      const int8_t sc = static_cast<int8_t>(blk[192 + (p % 256) / 16]);
      return 32.0 * half(208) * std::abs(static_cast<int>(sc));
    }
    default: return 0.0;
  }
}

// x[0, k) as the int8 kernels quantize it (quant_gemm.h): per block of xb
// values, sx = max|x| / levels in F32, v = x * (1 / sx) rounded to nearest
// even and clamped to +-levels (1 / sx = 0 below the smallest normal
// float); xq = sx v, half_step[b] = sx / 2.
void QuantizeXAsDocumented(const float* x, int64_t k, int64_t xb, float levels,
                           std::vector<float>* xq, std::vector<double>* half_step) {
  xq->assign(k, 0.0f);
  half_step->assign(k / xb, 0.0);
  for (int64_t b = 0; b < k / xb; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < xb; ++j) amax = std::max(amax, std::fabs(x[xb * b + j]));
    const float sx = amax / levels;
    const float inv = sx >= std::numeric_limits<float>::min() ? 1.0f / sx : 0.0f;
    for (int j = 0; j < xb; ++j) {
      const float v = std::min(levels, std::max(-levels, std::nearbyint(x[xb * b + j] * inv)));
      (*xq)[xb * b + j] = sx * v;
    }
    (*half_step)[b] = sx / 2.0;
  }
}

// x quantized per block of 32 as llama.cpp quantizes activations (its
// q8_0 / q8_1; the int8 panels, quant_gemm.h QuantizeXInt8): v = x * (127 /
// max|x|) rounded to nearest even (0 where the step is below the smallest
// normal float), the step max|x| / 127 rounded to F16 (xq = F16(step) v),
// and per block s = F16(step sum v) with the unrounded step (the minima
// term of Q4_1 / Q5_1; s_minus_sum[b] = s - F16(step) sum v).
void QuantizeXAsLlamaCpp(const float* x, int64_t k, std::vector<float>* xq,
                         std::vector<double>* half_step, std::vector<double>* s_minus_sum) {
  xq->assign(k, 0.0f);
  half_step->assign(k / 32, 0.0);
  s_minus_sum->assign(k / 32, 0.0);
  for (int64_t b = 0; b < k / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const float d = amax / 127.0f;
    const float id = d >= std::numeric_limits<float>::min() ? 127.0f / amax : 0.0f;
    const float d16 = F16ToFloat(FloatToF16(d));
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const float v = std::nearbyint(x[32 * b + j] * id);
      sum += static_cast<int32_t>(v);
      (*xq)[32 * b + j] = d16 * v;
    }
    // |x - xq| <= |d - F16(d)| |v| + d / 2.
    (*half_step)[b] = static_cast<double>(d) / 2.0 + std::fabs(static_cast<double>(d16) - d) * 127.0;
    (*s_minus_sum)[b] = static_cast<double>(F16ToFloat(FloatToF16(d * static_cast<float>(sum)))) -
                        static_cast<double>(d16) * sum;
  }
}

// The minimum (F16 m after d) of block b of a Q4_1 / Q5_1 row; 0 for the
// other formats.
double BlockMin(DType dtype, const uint8_t* row, int64_t b) {
  if (dtype != DType::kQ4_1 && dtype != DType::kQ5_1) return 0.0;
  uint16_t m;
  std::memcpy(&m, row + b * DTypeRowBytes(dtype, 32) + 2, 2);
  return F16ToFloat(m);
}

// The decode GEMV of the block-quantized formats at the avx512_bf16 level
// against a float64 dot product with x quantized as documented
// (quant_gemm.h: per block of 32, per super-block of 256 for Q4_K / Q6_K;
// sx = max|x| / 32512 in F32, v = x * (1 / sx) rounded to nearest even,
// 1 / sx = 0 for sx below the smallest normal float): only F32 rounding may
// separate them, 2e-6 relative to sum |x^| (|w| + |block offset|)
// (BlockOffset: the kernels fold the offsets in per block). And the same
// against the unquantized x: within sum |w| sx / 2. Activations span six
// decades (a large value per block, tiny ones, an all-zero block, an
// all-negative block), where an 8-bit activation would be off by ~1/254 of
// each block's max. At the other levels the F32 kernels are held to 1e-5.
TEST_P(LinearTest, DecodeGemvQuantizesActivationsTo16Bits) {
  uint32_t seed = 7000;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                      DType::kQ4_K, DType::kQ6_K}) {
    const int64_t xb = DTypeBlockElements(dtype);  // x's quantization block
    for (int64_t k : {32, 96, 160, 256, 2080, 2304, 5632}) {
      if (k % xb != 0) continue;
      const int64_t n = 11, nb = k / 32;
      std::vector<float> x = RandomVector(k, seed++, -1.0f, 1.0f);
      std::mt19937 rng(seed++);
      for (int64_t b = 0; b < nb; ++b) {
        float* xb = x.data() + 32 * b;
        if (b % 5 == 1) {
          for (int j = 0; j < 32; ++j) xb[j] = 0.0f;
        } else if (b % 5 == 2) {
          for (int j = 0; j < 32; ++j) xb[j] = -std::fabs(xb[j]) * 1e-3f;
        } else if (b % 5 == 3) {
          for (int j = 0; j < 32; ++j) xb[j] *= 1e-6f;
          xb[rng() % 32] = 3.0f;
        }
      }
      // An all-zero super-block (its step 0).
      if (xb == 256 && k >= 512) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
      std::vector<uint8_t> w = RandomWeights(dtype, n, k, seed++);
      const size_t row_bytes = DTypeRowBytes(dtype, k);
      std::vector<float> wf(n * k);
      for (int64_t r = 0; r < n; ++r) {
        ASSERT_TRUE(DequantizeRow(dtype, w.data() + r * row_bytes, k, wf.data() + r * k).ok());
      }
      std::vector<float> xq;
      std::vector<double> half_step;
      QuantizeXAsDocumented(x.data(), k, xb, 32512.0f, &xq, &half_step);
      std::vector<float> y(n);
      ASSERT_TRUE(Linear(kOpt, View2(x.data(), 1, k), TensorView::Contiguous(w.data(), dtype, {n, k}),
                         TensorView{}, View2(y.data(), 1, n)).ok());
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, quantized = 0, mag = 0, qmag = 0, rounding = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double coef = BlockOffset(dtype, w.data() + j * row_bytes, p);
          exact += static_cast<double>(x[p]) * wf[j * k + p];
          quantized += static_cast<double>(xq[p]) * wf[j * k + p];
          mag += std::fabs(x[p] * wf[j * k + p]);
          qmag += std::fabs(xq[p]) * (std::fabs(wf[j * k + p]) + coef);
          rounding += std::fabs(wf[j * k + p]) * half_step[p / xb];
        }
        if (Bf16DotActive()) {
          ASSERT_NEAR(y[j], quantized, 2e-6 * qmag + 1e-9)
              << DTypeName(dtype) << " k=" << k << " row " << j;
          ASSERT_NEAR(y[j], exact, 2e-6 * qmag + 1.001 * rounding + 1e-9)
              << DTypeName(dtype) << " k=" << k << " row " << j;
        } else {
          ASSERT_NEAR(y[j], exact, 1e-5 * qmag + 1e-9) << DTypeName(dtype) << " k=" << k;
        }
      }
    }
  }
}

// The int8 activation policy (ActivationPrecision::kInt8) at the
// avx512_bf16 level: every block-quantized format at every M against a
// float64 dot product with x quantized as documented (ops.h, quant_gemm.h):
// per block of 32, per super-block of 256 for Q4_K / Q6_K, at every M (up
// to 7 rows the int8 GEMV, from 8 the int8 GEMM); sx = max|x| / 127
// in F32, v = x * (1 / sx) rounded to nearest even; the int8 panels (the
// loader's layout under this policy) quantize blocks of 32 as llama.cpp
// does (QuantizeXAsLlamaCpp: F16 steps). The integer sums are
// exact, so only F32 rounding may separate them: 2e-6 (GEMV) and 1e-5
// (GEMM, whose F32 epilogue runs per block) relative to sum |x^| (|w| +
// |block offset|). Against the unquantized x: within sum |w| sx / 2 more.
// At the other levels the policy runs the exact kernels: 1e-5 of the
// reference.
TEST_P(LinearTest, Int8ActivationsMatchTheQuantizedDotProduct) {
  uint32_t seed = 12000;
  ExecutionContext int8 = kOpt;
  int8.activations = ActivationPrecision::kInt8;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                      DType::kQ4_K, DType::kQ6_K}) {
    const int64_t wb = DTypeBlockElements(dtype);
    for (int64_t k : {256, 768, 2304}) {
      for (int64_t m : {1, 2, 5, 7, 8, 16, 64, 65, 130}) {
        const bool gemv = m < 8;
        const int64_t n = gemv ? 11 : 37;
        const int64_t xb = wb;  // x's quantization block
        const int64_t ldx = k + (m % 3);
        std::vector<float> x = RandomVector(m * ldx, seed++, -1.0f, 1.0f);
        // Blocks of six decades, an all-zero and an all-negative block.
        std::mt19937 rng(seed++);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t b = 0; b < k / 32; ++b) {
            float* xr = x.data() + i * ldx + 32 * b;
            if ((b + i) % 7 == 1) {
              for (int j = 0; j < 32; ++j) xr[j] = 0.0f;
            } else if ((b + i) % 7 == 2) {
              for (int j = 0; j < 32; ++j) xr[j] = -std::fabs(xr[j]) * 1e-3f;
            } else if ((b + i) % 7 == 3) {
              for (int j = 0; j < 32; ++j) xr[j] *= 1e-6f;
              xr[rng() % 32] = 3.0f;
            }
          }
        }
        std::vector<uint8_t> w = RandomWeights(dtype, n, k, seed++);
        std::vector<float> bias = RandomVector(n, seed++);
        const size_t row_bytes = DTypeRowBytes(dtype, k);
        std::vector<float> wf(n * k);
        for (int64_t r = 0; r < n; ++r) {
          ASSERT_TRUE(DequantizeRow(dtype, w.data() + r * row_bytes, k, wf.data() + r * k).ok());
        }
        const TensorView bv = TensorView::Contiguous(bias.data(), DType::kF32, {n});
        // As stored, and repacked as the loader does under this policy
        // (int8 panels, one kernel at every M; none below avx512_bf16).
        TensorView wv = TensorView::Contiguous(w.data(), dtype, {n, k});
        absl::StatusOr<DeviceBuffer> panels = PackLinearWeight(int8, wv);
        ASSERT_TRUE(panels.ok()) << panels.status();
        ASSERT_EQ(panels->size() > 0, Bf16DotActive()) << DTypeName(dtype);
        for (bool packed : {false, true}) {
        if (packed && panels->size() == 0) continue;
        wv.packed = packed ? panels->data() : nullptr;
        std::vector<float> y(m * n);
        ASSERT_TRUE(Linear(int8, View2(x.data(), m, k, ldx), wv, bv, View2(y.data(), m, n)).ok());
        for (int64_t i = 0; i < m; ++i) {
          const float* xr = x.data() + i * ldx;
          std::vector<float> xq;
          std::vector<double> half_step, s_minus_sum;
          const bool llama = packed && xb == 32;
          if (llama) {
            QuantizeXAsLlamaCpp(xr, k, &xq, &half_step, &s_minus_sum);
          } else {
            QuantizeXAsDocumented(xr, k, xb, 127.0f, &xq, &half_step);
          }
          for (int64_t j = 0; j < n; ++j) {
            double exact = bias[j], quantized = bias[j], qmag = std::fabs(bias[j]), rounding = 0;
            for (int64_t b = 0; llama && b < k / 32; ++b) {
              const double mb = BlockMin(dtype, w.data() + j * row_bytes, b);
              quantized += mb * s_minus_sum[b];
              rounding += std::fabs(mb * s_minus_sum[b]);
            }
            for (int64_t p = 0; p < k; ++p) {
              const double coef = BlockOffset(dtype, w.data() + j * row_bytes, p);
              exact += static_cast<double>(xr[p]) * wf[j * k + p];
              quantized += static_cast<double>(xq[p]) * wf[j * k + p];
              qmag += (std::fabs(xq[p]) + std::fabs(xr[p])) * (std::fabs(wf[j * k + p]) + coef);
              rounding += std::fabs(wf[j * k + p]) * half_step[p / xb];
            }
            const float got = y[i * n + j];
            if (Bf16DotActive()) {
              const double rel = gemv && !packed ? 2e-6 : 1e-5;
              ASSERT_NEAR(got, quantized, rel * qmag + 1e-9)
                  << DTypeName(dtype) << " m=" << m << " k=" << k << " at (" << i << "," << j << ")";
              ASSERT_NEAR(got, exact, rel * qmag + 1.001 * rounding + 1e-9)
                  << DTypeName(dtype) << " m=" << m << " k=" << k << " at (" << i << "," << j << ")";
            } else {
              ASSERT_NEAR(got, exact, 1e-5 * qmag + 1e-9)
                  << DTypeName(dtype) << " m=" << m << " k=" << k << " at (" << i << "," << j << ")";
            }
          }
        }
        }
      }
    }
  }
}

// The int8 panels (PackLinearWeight under the int8 policy, as decoders load
// their block-quantized weights): every row's output is the same bits at
// every M and wherever the row sits in the batch, including alone, and
// rows past a panel's 16 (n = 37, 40) and K of one block or many.
TEST_P(LinearTest, Int8PanelsGiveEveryRowTheSameBitsAtAnyM) {
  uint32_t seed = 14000;
  ExecutionContext int8 = kOpt;
  int8.activations = ActivationPrecision::kInt8;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                      DType::kQ4_K, DType::kQ6_K}) {
    const int64_t wb = DTypeBlockElements(dtype);
    for (int64_t k : {wb, 3 * wb, int64_t{2304}}) {
      if (k % wb != 0) continue;
      const int64_t n = k == wb ? 37 : 40, max_m = 70;
      std::vector<uint8_t> w = RandomWeights(dtype, n, k, seed++);
      TensorView wv = TensorView::Contiguous(w.data(), dtype, {n, k});
      absl::StatusOr<DeviceBuffer> panels = PackLinearWeight(int8, wv);
      ASSERT_TRUE(panels.ok()) << panels.status();
      // Below avx512_bf16 (or without VNNI) there are none: the policy runs
      // the exact kernels there (Int8ActivationsMatchTheQuantizedDotProduct).
      ASSERT_EQ(panels->size() > 0, Bf16DotActive()) << DTypeName(dtype);
      if (panels->size() == 0) continue;
      wv.packed = panels->data();
      std::vector<float> x = RandomVector(max_m * k, seed++, -2.0f, 2.0f);
      std::vector<float> bias = RandomVector(n, seed++);
      const TensorView bv = TensorView::Contiguous(bias.data(), DType::kF32, {n});
      // Each row alone.
      std::vector<float> alone(max_m * n);
      for (int64_t i = 0; i < max_m; ++i) {
        ASSERT_TRUE(Linear(int8, View2(x.data() + i * k, 1, k), wv, bv,
                           View2(alone.data() + i * n, 1, n)).ok());
      }
      for (int64_t m : {2, 3, 5, 7, 8, 9, 13, 33, 64, 70}) {
        // Rows [first, first + m) as one batch.
        const int64_t first = (max_m - m) / 2;
        std::vector<float> y(m * n);
        ASSERT_TRUE(Linear(int8, View2(x.data() + first * k, m, k), wv, bv,
                           View2(y.data(), m, n)).ok());
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_EQ(y[i * n + j], alone[(first + i) * n + j])
                << DTypeName(dtype) << " k=" << k << " m=" << m << " at (" << i << "," << j << ")";
          }
        }
      }
    }
  }
}

// One activation row of K = 512 against a random [37, 512] weight of dtype,
// placed at rows 0, m / 2 and m - 1 of random batches: Expect checks that
// its output is bit for bit the one of the first batch of the same class.
class RowClasses {
 public:
  RowClasses(DType dtype, uint32_t* seed)
      : dtype_(dtype), w_(RandomWeights(dtype, kN, kK, (*seed)++)),
        row_(RandomVector(kK, (*seed)++)) {}

  void Expect(const ExecutionContext& ctx, int64_t m, const std::string& path,
              uint32_t* seed) {
    const TensorView wv = TensorView::Contiguous(w_.data(), dtype_, {kN, kK});
    for (int64_t at : {int64_t{0}, m / 2, m - 1}) {
      std::vector<float> x = RandomVector(m * kK, (*seed)++);
      std::copy(row_.begin(), row_.end(), x.begin() + at * kK);
      std::vector<float> y(m * kN);
      ASSERT_TRUE(Linear(ctx, View2(x.data(), m, kK), wv, TensorView{},
                         View2(y.data(), m, kN)).ok());
      std::vector<float> got(y.begin() + at * kN, y.begin() + (at + 1) * kN);
      auto [it, inserted] = first_.emplace(path, got);
      if (inserted) continue;
      for (int64_t j = 0; j < kN; ++j) {
        ASSERT_EQ(got[j], it->second[j]) << DTypeName(dtype_) << " " << path << " m=" << m
                                         << " at row " << at << " column " << j;
      }
    }
  }

 private:
  static constexpr int64_t kN = 37, kK = 512;
  DType dtype_;
  std::vector<uint8_t> w_;
  std::vector<float> row_;
  // The row's output per class, from the first batch of that class.
  std::map<std::string, std::vector<float>> first_;
};

// Under the int8 policy a row's output does not depend on its batch-mates
// nor on the batch size within each kernel class: one activation row at
// several positions among random others, decode-only or not, must give the
// same bits in every batch of 1 to 7 rows (the int8 GEMV) and in every
// batch of 8 or more (the int8 GEMM: x per block of 32, another summation
// order). Below avx512_bf16 the policy runs the exact kernels, whose
// classes are M = 1, 2..64 and above 64.
TEST_P(LinearTest, Int8RowOutputDoesNotDependOnBatchSize) {
  uint32_t seed = 13000;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                      DType::kQ4_K, DType::kQ6_K}) {
    RowClasses classes(dtype, &seed);
    for (int64_t m : {1, 2, 3, 7, 8, 9, 13, 33, 64, 65, 130}) {
      std::string path = m > 64 ? "f32-tiles" : m == 1 ? "gemv" : "f32-small-m";
      if (Bf16DotActive()) path = m < 8 ? "gemv" : "gemm";
      for (bool decode_rows : {false, true}) {
        ExecutionContext ctx = kOpt;
        ctx.decode_rows = decode_rows;
        ctx.activations = ActivationPrecision::kInt8;
        classes.Expect(ctx, m, path, &seed);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Batch invariance in a decode-only step (ExecutionContext::decode_rows): a
// row's output does not depend on the other rows of the batch. One
// activation row, placed at several positions among random others, in
// batches of every size class: its output must be bit for bit the same
// within each path (int8 GEMM from M = 8 at the avx512_bf16 level; the F32
// kernels at M = 2..7 and, below avx512_bf16, up to 64), and within the
// paths' tolerances (MatchesReferenceForQuantizedAndF16Weights) across
// them.
TEST_P(LinearTest, RowOutputDoesNotDependOnBatchMates) {
  uint32_t seed = 9100;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                      DType::kQ4_K, DType::kQ6_K, DType::kF16}) {
    RowClasses classes(dtype, &seed);
    for (int64_t m : {2, 3, 5, 7, 8, 9, 13, 33, 64, 65, 130}) {
      const bool int8_x = m >= 8 && Bf16DotActive() && dtype != DType::kF16;
      const std::string path = int8_x ? "int8" : m > 64 ? "f32-tiles" : "f32-small-m";
      ExecutionContext decode = kOpt;
      decode.decode_rows = true;
      classes.Expect(decode, m, path, &seed);
      if (HasFatalFailure()) return;
    }
  }
}

// Weights packed at load (PackLinearWeight, as encoders keep them): a
// packed copy exists exactly where the CPU has the panel kernels (F32 at
// avx512, block-quantized at avx512_bf16 with VNNI, BF16 where vdpbf16ps is
// in use); Linear with it gives the unpacked results: bit for bit where
// both take the same path (M > 64; M = 1 and quantized small M read the
// stored rows), within the F32 tolerance of the reference elsewhere (for
// BF16 pairs: of the float64 product of the BF16-rounded activations,
// which is what vdpbf16ps computes). A packed copy of another shape is
// ignored.
TEST_P(LinearTest, PackedWeightsGiveTheUnpackedResults) {
  uint32_t seed = 300;
  const CpuIsa isa = GetParam();
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                      DType::kQ4_K, DType::kQ6_K}) {
    const int64_t block = DTypeBlockElements(dtype);
    for (int64_t n : {5, 40, 67}) {
      for (int64_t k : {block == 256 ? int64_t{512} : int64_t{96}, int64_t{1024}}) {
        std::vector<uint8_t> w;
        std::vector<float> wf(n * k);
        if (dtype == DType::kF32) {
          wf = RandomVector(n * k, seed++);
          w.resize(n * k * 4);
          std::memcpy(w.data(), wf.data(), w.size());
        } else if (dtype == DType::kBF16) {
          std::vector<uint16_t> w16 = ToBf16(RandomVector(n * k, seed++));
          w.resize(n * k * 2);
          std::memcpy(w.data(), w16.data(), w.size());
          for (int64_t i = 0; i < n * k; ++i) wf[i] = Bf16ToFloat(w16[i]);
        } else {
          w = RandomWeights(dtype, n, k, seed++);
          const size_t row_bytes = DTypeRowBytes(dtype, k);
          for (int64_t r = 0; r < n; ++r) {
            ASSERT_TRUE(DequantizeRow(dtype, w.data() + r * row_bytes, k, wf.data() + r * k).ok());
          }
        }
        TensorView wv = TensorView::Contiguous(w.data(), dtype, {n, k});
        absl::StatusOr<DeviceBuffer> packed = PackLinearWeight(kOpt, wv);
        ASSERT_TRUE(packed.ok()) << packed.status();
        const bool expect_packed =
            dtype == DType::kF32 ? isa >= CpuIsa::kAvx512
                                    : Bf16DotActive();
        ASSERT_EQ(packed->size() > 0, expect_packed)
            << DTypeName(dtype) << " at " << CpuIsaName(isa);
        if (!expect_packed) continue;
        TensorView wp = wv;
        wp.packed = packed->data();
        // The same weight with the last row dropped: the header no longer
        // matches, so the panels must be ignored.
        TensorView wrong = TensorView::Contiguous(w.data(), dtype, {n - 1, k});
        wrong.packed = packed->data();
        for (int64_t m : {1, 9, 64, 65, 130}) {
          std::vector<float> x = RandomVector(m * k, seed++);
          std::vector<float> bias = RandomVector(n, seed++);
          const TensorView bv = TensorView::Contiguous(bias.data(), DType::kF32, {n});
          std::vector<float> y(m * n), y_packed(m * n), y_ref(m * n);
          std::vector<float> y_wrong(m * (n - 1)), y_wrong_plain(m * (n - 1));
          ASSERT_TRUE(Linear(kOpt, View2(x.data(), m, k), wv, bv, View2(y.data(), m, n)).ok());
          ASSERT_TRUE(Linear(kOpt, View2(x.data(), m, k), wp, bv, View2(y_packed.data(), m, n)).ok());
          ASSERT_TRUE(Linear(kRef, View2(x.data(), m, k), wv, bv, View2(y_ref.data(), m, n)).ok());
          const TensorView bw = TensorView::Contiguous(bias.data(), DType::kF32, {n - 1});
          ASSERT_TRUE(Linear(kOpt, View2(x.data(), m, k), wrong, bw,
                             View2(y_wrong.data(), m, n - 1)).ok());
          wrong.packed = nullptr;
          ASSERT_TRUE(Linear(kOpt, View2(x.data(), m, k), wrong, bw,
                             View2(y_wrong_plain.data(), m, n - 1)).ok());
          wrong.packed = packed->data();
          EXPECT_EQ(y_wrong, y_wrong_plain) << DTypeName(dtype) << " m=" << m;
          const bool same_path = m > 64 || (m == 1 && dtype == DType::kBF16);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              if (same_path) {
                ASSERT_EQ(y_packed[i * n + j], y[i * n + j])
                    << DTypeName(dtype) << " m=" << m << " n=" << n << " k=" << k
                    << " at (" << i << "," << j << ")";
              } else if (dtype == DType::kF32) {
                double mag = 0;
                for (int64_t p = 0; p < k; ++p) {
                  mag += std::fabs(x[i * k + p]) * std::fabs(wf[j * k + p]);
                }
                ASSERT_NEAR(y_packed[i * n + j], y_ref[i * n + j], 1e-5 * mag + 1e-6)
                    << "m=" << m << " n=" << n << " k=" << k << " at (" << i << "," << j << ")";
              } else if (dtype == DType::kBF16) {
                double want = bias[j], mag = std::fabs(bias[j]);
                for (int64_t p = 0; p < k; ++p) {
                  const double xp = Bf16ToFloat(FloatToBf16(x[i * k + p]));
                  want += xp * wf[j * k + p];
                  mag += std::fabs(xp * wf[j * k + p]);
                }
                ASSERT_NEAR(y_packed[i * n + j], want, 1e-5 * mag + 1e-6)
                    << "bf16 m=" << m << " n=" << n << " k=" << k << " at (" << i << "," << j << ")";
              } else {
                // Small M reads the unpacked weights.
                ASSERT_EQ(y_packed[i * n + j], y[i * n + j]);
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(LinearTest, MatMulMatchesDirectProduct) {
  for (bool transpose_b : {false, true}) {
    const int64_t m = 37, k = 45, n = 70;
    std::vector<float> a = RandomVector(m * k, 3), b = RandomVector(k * n, 4);
    std::vector<float> c(m * n);
    TensorView bv = transpose_b ? View2(b.data(), n, k) : View2(b.data(), k, n);
    ASSERT_TRUE(MatMul(kOpt, View2(a.data(), m, k), bv, transpose_b, View2(c.data(), m, n)).ok());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          s += a[i * k + p] * (transpose_b ? b[j * k + p] : b[p * n + j]);
        }
        ASSERT_NEAR(c[i * n + j], s, 1e-4);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, LinearTest, INFERD_ALL_ISAS, testing_util::IsaParamName);

// The BF16-weight GEMM policy at the avx512_bf16 level: kWiden keeps F32
// activations (the F32 tolerance holds for exactly-representable BF16
// weights), kDot rounds them to BF16, kAuto follows the measured rate.
TEST(Bf16GemmPolicyTest, WidenKeepsF32AccuracyAndAutoFollowsTheMeasuredRate) {
  if (DetectedCpuIsa() < CpuIsa::kAvx512Bf16) {
    GTEST_SKIP() << "no AVX512_BF16 on this CPU: BF16 weights always widen";
  }
  const CpuIsa saved_cap = CpuIsaCap();
  const Bf16GemmPolicy saved = GetBf16GemmPolicy();
  SetCpuIsaCap(CpuIsa::kAvx512Bf16);
  SetBf16GemmPolicy(Bf16GemmPolicy::kAuto);
  const double rate = Bf16DotToFmaRate();
  EXPECT_GT(rate, 0.05);
  EXPECT_LT(rate, 20.0);
  EXPECT_EQ(Bf16DotInUse(), rate > 1.0);
  SetBf16GemmPolicy(Bf16GemmPolicy::kDot);
  EXPECT_TRUE(Bf16DotInUse());
  SetCpuIsaCap(CpuIsa::kAvx512);
  EXPECT_FALSE(Bf16DotInUse()) << "the policy never lifts the ISA cap";
  SetCpuIsaCap(CpuIsa::kAvx512Bf16);
  SetBf16GemmPolicy(Bf16GemmPolicy::kWiden);
  EXPECT_FALSE(Bf16DotInUse());
  uint32_t seed = 7;
  // 1: GEMV; 16, 64: small-M kernel; 130: blocked GEMM.
  for (int64_t m : {1, 16, 64, 130}) {
    const int64_t n = 67, k = 300;
    std::vector<float> x = RandomVector(m * k, seed++);
    std::vector<float> w = RandomVector(n * k, seed++);
    std::vector<uint16_t> w16 = ToBf16(w);
    for (int64_t i = 0; i < n * k; ++i) w[i] = Bf16ToFloat(w16[i]);
    const TensorView wv = TensorView::Contiguous(w16.data(), DType::kBF16, {n, k});
    std::vector<float> y(m * n), y_ref(m * n);
    ASSERT_TRUE(Linear(kOpt, View2(x.data(), m, k), wv, TensorView{}, View2(y.data(), m, n)).ok());
    ASSERT_TRUE(Linear(kRef, View2(x.data(), m, k), wv, TensorView{}, View2(y_ref.data(), m, n)).ok());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double mag = 0;
        for (int64_t p = 0; p < k; ++p) mag += std::fabs(x[i * k + p] * w[j * k + p]);
        ASSERT_NEAR(y[i * n + j], y_ref[i * n + j], 1e-5 * mag + 1e-6)
            << "m=" << m << " at (" << i << "," << j << ")";
      }
    }
  }
  SetBf16GemmPolicy(saved);
  SetCpuIsaCap(saved_cap);
}

class ElementwiseTest : public IsaCapTest {};

double GeluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

TEST_P(ElementwiseTest, ActivationsMatchFormulas) {
  for (int64_t cols : {1, 3, 17, 129, 1000}) {
    const int64_t rows = 5;
    std::vector<float> x = RandomVector(rows * cols, cols, -6.0f, 6.0f);
    std::vector<float> out(rows * cols);
    for (Activation act : {Activation::kSilu, Activation::kGeluErf, Activation::kGeluTanh,
                           Activation::kRelu, Activation::kTanh}) {
      ASSERT_TRUE(Activate(kOpt, act, View2(x.data(), rows, cols), View2(out.data(), rows, cols)).ok());
      for (int64_t i = 0; i < rows * cols; ++i) {
        const double v = x[i];
        double want = 0;
        switch (act) {
          case Activation::kSilu: want = v / (1 + std::exp(-v)); break;
          case Activation::kGeluErf: want = GeluErf(v); break;
          case Activation::kGeluTanh:
            want = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
            break;
          case Activation::kRelu: want = v > 0 ? v : 0; break;
          case Activation::kTanh: want = std::tanh(v); break;
        }
        // Fast exp/erf/tanh: <= 1e-6 absolute + 1e-5 relative.
        ASSERT_NEAR(out[i], want, 1e-6 + 1e-5 * std::fabs(want)) << "act " << static_cast<int>(act) << " x=" << v;
      }
    }
  }
}

// Far tails: erf saturates to +-1 (GELU(x) = x or 0) without NaN.
TEST_P(ElementwiseTest, GeluErfSaturatesInTheTails) {
  std::vector<float> x = {-1e4f, -50.0f, -14.2f, -9.0f, 9.0f, 14.2f, 50.0f, 1e4f,
                          -3e38f, 3e38f, 0.0f, -0.0f, 1e-30f, -1e-30f, 7.5f, -7.5f};
  std::vector<float> out(x.size());
  const int64_t n = static_cast<int64_t>(x.size());
  ASSERT_TRUE(Activate(kOpt, Activation::kGeluErf, View2(x.data(), 1, n), View2(out.data(), 1, n)).ok());
  for (int64_t i = 0; i < n; ++i) {
    const double want = GeluErf(x[i]);
    ASSERT_FALSE(std::isnan(out[i])) << "x=" << x[i];
    ASSERT_NEAR(out[i], want, 1e-6 + 1e-5 * std::fabs(want)) << "x=" << x[i];
  }
}

TEST_P(ElementwiseTest, GatedActivationFusedAndSeparateLayoutsAgree) {
  const int64_t rows = 7, inter = 33;
  std::vector<float> gate_up = RandomVector(rows * 2 * inter, 11, -4, 4);
  std::vector<float> fused(rows * inter), separate(rows * inter);
  ASSERT_TRUE(SwiGlu(kOpt, View2(gate_up.data(), rows, 2 * inter), View2(fused.data(), rows, inter)).ok());
  TensorView gate = View2(gate_up.data(), rows, inter, 2 * inter);
  TensorView up = View2(gate_up.data() + inter, rows, inter, 2 * inter);
  ASSERT_TRUE(SwiGlu(kOpt, gate, up, View2(separate.data(), rows, inter)).ok());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < inter; ++j) {
      const double g = gate_up[r * 2 * inter + j], u = gate_up[r * 2 * inter + inter + j];
      const double want = g / (1 + std::exp(-g)) * u;
      EXPECT_NEAR(fused[r * inter + j], want, 1e-5 * (1 + std::fabs(want)));
      EXPECT_EQ(fused[r * inter + j], separate[r * inter + j]);
    }
  }
}

TEST_P(ElementwiseTest, SoftmaxAndAddMatchReference) {
  for (int64_t cols : {1, 17, 1000}) {
    const int64_t rows = 9;
    std::vector<float> x = RandomVector(rows * cols, 5, -20, 20), y = RandomVector(rows * cols, 6);
    std::vector<float> a(rows * cols), b(rows * cols);
    ASSERT_TRUE(Softmax(kOpt, View2(x.data(), rows, cols), View2(a.data(), rows, cols)).ok());
    ASSERT_TRUE(Softmax(kRef, View2(x.data(), rows, cols), View2(b.data(), rows, cols)).ok());
    for (int64_t i = 0; i < rows * cols; ++i) ASSERT_NEAR(a[i], b[i], 1e-6 + 1e-5 * b[i]);
    ASSERT_TRUE(Add(kOpt, View2(x.data(), rows, cols), View2(y.data(), rows, cols), View2(a.data(), rows, cols)).ok());
    for (int64_t i = 0; i < rows * cols; ++i) ASSERT_EQ(a[i], x[i] + y[i]);
  }
}

TEST_P(ElementwiseTest, NormsMatchDirectFormulas) {
  for (int64_t h : {1, 3, 17, 129, 1000}) {
    const int64_t rows = 6;
    std::vector<float> x = RandomVector(rows * h, h, -3, 3), w = RandomVector(h, 2), b = RandomVector(h, 3);
    std::vector<float> res = RandomVector(rows * h, 4);
    std::vector<float> ln(rows * h), rms(rows * h);
    const float eps = 1e-5f;
    ASSERT_TRUE(LayerNorm(kOpt, View2(x.data(), rows, h), TensorView::Contiguous(w.data(), DType::kF32, {h}),
                          TensorView::Contiguous(b.data(), DType::kF32, {h}), eps, View2(ln.data(), rows, h)).ok());
    std::vector<float> res_after = res;
    ASSERT_TRUE(AddRmsNorm(kOpt, View2(x.data(), rows, h), View2(res_after.data(), rows, h),
                           TensorView::Contiguous(w.data(), DType::kF32, {h}), eps, View2(rms.data(), rows, h)).ok());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0, ss = 0;
      for (int64_t j = 0; j < h; ++j) mean += x[r * h + j];
      mean /= h;
      for (int64_t j = 0; j < h; ++j) var += std::pow(x[r * h + j] - mean, 2);
      var /= h;
      for (int64_t j = 0; j < h; ++j) {
        const double s = static_cast<double>(x[r * h + j]) + res[r * h + j];
        ASSERT_NEAR(res_after[r * h + j], s, 1e-6);
        ss += s * s;
      }
      for (int64_t j = 0; j < h; ++j) {
        const double want_ln = (x[r * h + j] - mean) / std::sqrt(var + eps) * w[j] + b[j];
        ASSERT_NEAR(ln[r * h + j], want_ln, 1e-4 * (1 + std::fabs(want_ln))) << "h=" << h;
        const double s = static_cast<double>(x[r * h + j]) + res[r * h + j];
        const double want_rms = s / std::sqrt(ss / h + eps) * w[j];
        ASSERT_NEAR(rms[r * h + j], want_rms, 1e-4 * (1 + std::fabs(want_rms)));
      }
    }
  }
}

TEST_P(ElementwiseTest, EmbeddingGathersF32AndBf16Rows) {
  const int64_t vocab = 50, h = 33;
  std::vector<float> table = RandomVector(vocab * h, 8);
  std::vector<uint16_t> table16 = ToBf16(table);
  std::vector<int32_t> ids = {3, 0, 49, 3, 17};
  TensorView idv = TensorView::Contiguous(ids.data(), DType::kI32, {5});
  std::vector<float> out(5 * h), out16(5 * h);
  ASSERT_TRUE(Embedding(kOpt, TensorView::Contiguous(table.data(), DType::kF32, {vocab, h}), idv,
                        View2(out.data(), 5, h)).ok());
  ASSERT_TRUE(Embedding(kOpt, TensorView::Contiguous(table16.data(), DType::kBF16, {vocab, h}), idv,
                        View2(out16.data(), 5, h)).ok());
  for (int t = 0; t < 5; ++t) {
    for (int64_t j = 0; j < h; ++j) {
      EXPECT_EQ(out[t * h + j], table[ids[t] * h + j]);
      EXPECT_EQ(out16[t * h + j], Bf16ToFloat(table16[ids[t] * h + j]));
    }
  }
  ids[1] = 50;
  EXPECT_EQ(Embedding(kOpt, TensorView::Contiguous(table.data(), DType::kF32, {vocab, h}), idv,
                      View2(out.data(), 5, h)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(ElementwiseTest, EmbeddingDecodesQuantizedAndF16Rows) {
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ4_K,
                      DType::kQ6_K, DType::kF16}) {
    const int64_t vocab = 40, h = DTypeBlockElements(dtype) == 256 ? 512 : 96;
    std::vector<uint8_t> table = RandomWeights(dtype, vocab, h, 9);
    const size_t row_bytes = DTypeRowBytes(dtype, h);
    std::vector<int32_t> ids = {3, 0, 39, 3, 17, 22, 8};
    const int64_t t = ids.size();
    const TensorView idv = TensorView::Contiguous(ids.data(), DType::kI32, {t});
    const TensorView tv = TensorView::Contiguous(table.data(), dtype, {vocab, h});
    std::vector<float> out(t * h), out_ref(t * h), want(h);
    ASSERT_TRUE(Embedding(kOpt, tv, idv, View2(out.data(), t, h)).ok());
    ASSERT_TRUE(Embedding(kRef, tv, idv, View2(out_ref.data(), t, h)).ok());
    for (int64_t r = 0; r < t; ++r) {
      ASSERT_TRUE(DequantizeRow(dtype, table.data() + ids[r] * row_bytes, h, want.data()).ok());
      for (int64_t j = 0; j < h; ++j) {
        ASSERT_EQ(out[r * h + j], want[j]) << DTypeName(dtype);
        ASSERT_EQ(out_ref[r * h + j], want[j]) << DTypeName(dtype);
      }
    }
    ids[2] = 40;
    EXPECT_EQ(Embedding(kOpt, tv, idv, View2(out.data(), t, h)).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, ElementwiseTest, INFERD_ALL_ISAS, testing_util::IsaParamName);

TEST(ConvertTest, RoundTripsThroughBf16AndF16) {
  std::vector<float> src = {0.0f, 1.0f, -2.5f, 3.14159f, 65504.0f, 1e-6f, -1e-8f, 70000.0f};
  std::vector<uint16_t> half(src.size());
  std::vector<float> back(src.size());
  const int64_t n = src.size();
  for (DType d : {DType::kBF16, DType::kF16}) {
    ASSERT_TRUE(Convert(kOpt, TensorView::Contiguous(src.data(), DType::kF32, {n}),
                        TensorView::Contiguous(half.data(), d, {n})).ok());
    ASSERT_TRUE(Convert(kOpt, TensorView::Contiguous(half.data(), d, {n}),
                        TensorView::Contiguous(back.data(), DType::kF32, {n})).ok());
    for (int64_t i = 0; i < n; ++i) {
      if (d == DType::kF16 && std::fabs(src[i]) > 65504.0f) {
        EXPECT_TRUE(std::isinf(back[i]));
      } else if (d == DType::kF16 && std::fabs(src[i]) < 6e-5f) {
        EXPECT_NEAR(back[i], src[i], 6e-8);  // subnormal spacing
      } else {
        EXPECT_NEAR(back[i], src[i], std::fabs(src[i]) * (d == DType::kBF16 ? 4e-3 : 5e-4));
      }
    }
  }
}

// ---- RoPE -------------------------------------------------------------

std::vector<double> DefaultInvFreq(double theta, int dim) {
  std::vector<double> f;
  for (int i = 0; i < dim; i += 2) f.push_back(std::pow(theta, -static_cast<double>(i) / dim));
  return f;
}

TEST(RopeTest, InvFreqFollowsScalingFormulas) {
  const int dim = 64;
  const double theta = 500000.0;
  RopeConfig base;
  base.head_dim = dim;
  base.theta = theta;
  base.max_position_embeddings = 8192;
  const std::vector<double> f0 = DefaultInvFreq(theta, dim);
  {
    auto rope = RopeCache::Create(base);
    ASSERT_TRUE(rope.ok());
    std::vector<float> f = rope->InvFreq();
    for (int i = 0; i < dim / 2; ++i) EXPECT_NEAR(f[i], f0[i], 1e-7 * f0[i] + 1e-30);
  }
  {  // linear
    RopeConfig c = base;
    c.scaling.type = RopeScalingType::kLinear;
    c.scaling.factor = 4;
    std::vector<float> f = RopeCache::Create(c)->InvFreq();
    for (int i = 0; i < dim / 2; ++i) EXPECT_NEAR(f[i], f0[i] / 4, 1e-7 * f0[i]);
  }
  {  // dynamic NTK: unchanged up to max_pos, base rescaled beyond
    RopeConfig c = base;
    c.scaling.type = RopeScalingType::kDynamicNtk;
    c.scaling.factor = 2;
    auto rope = RopeCache::Create(c);
    std::vector<float> short_f = rope->InvFreq(100), long_f = rope->InvFreq(16384);
    const double new_base = theta * std::pow(2.0 * 16384 / 8192 - 1, dim / (dim - 2.0));
    const std::vector<double> fl = DefaultInvFreq(new_base, dim);
    for (int i = 0; i < dim / 2; ++i) {
      EXPECT_NEAR(short_f[i], f0[i], 1e-7 * f0[i]);
      EXPECT_NEAR(long_f[i], fl[i], 1e-6 * fl[i]);
    }
  }
  {  // llama3 (Llama 3.1 parameters)
    RopeConfig c = base;
    c.scaling.type = RopeScalingType::kLlama3;
    c.scaling.factor = 8;
    c.scaling.low_freq_factor = 1;
    c.scaling.high_freq_factor = 4;
    c.scaling.original_max_position_embeddings = 8192;
    std::vector<float> f = RopeCache::Create(c)->InvFreq();
    for (int i = 0; i < dim / 2; ++i) {
      const double wavelen = 2 * M_PI / f0[i];
      double want;
      if (wavelen < 8192.0 / 4) {
        want = f0[i];
      } else if (wavelen > 8192.0 / 1) {
        want = f0[i] / 8;
      } else {
        const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
        want = (1 - smooth) * f0[i] / 8 + smooth * f0[i];
      }
      EXPECT_NEAR(f[i], want, 1e-6 * want) << i;
    }
  }
  {  // yarn
    RopeConfig c = base;
    c.theta = 10000;
    c.scaling.type = RopeScalingType::kYarn;
    c.scaling.factor = 4;
    c.scaling.original_max_position_embeddings = 4096;
    auto rope = RopeCache::Create(c);
    EXPECT_NEAR(rope->attention_factor(), 0.1 * std::log(4.0) + 1, 1e-6);
    const std::vector<double> g0 = DefaultInvFreq(10000, dim);
    auto corr = [&](double rot) {
      return dim * std::log(4096 / (rot * 2 * M_PI)) / (2 * std::log(10000.0));
    };
    const double low = std::max(0.0, std::floor(corr(32))), high = std::min(dim - 1.0, std::ceil(corr(1)));
    std::vector<float> f = rope->InvFreq();
    for (int i = 0; i < dim / 2; ++i) {
      const double ramp = std::min(1.0, std::max(0.0, (i - low) / (high - low)));
      const double want = g0[i] / 4 * ramp + g0[i] * (1 - ramp);
      EXPECT_NEAR(f[i], want, 1e-6 * want) << i;
    }
    c.scaling.mscale = 1;
    c.scaling.mscale_all_dim = 0.5;
    EXPECT_NEAR(RopeCache::Create(c)->attention_factor(),
                (0.1 * std::log(4.0) + 1) / (0.05 * std::log(4.0) + 1), 1e-6);
  }
  {  // longrope: short factors up to the original context, long beyond
    RopeConfig c = base;
    c.max_position_embeddings = 131072;
    c.scaling.type = RopeScalingType::kLongRope;
    c.scaling.factor = 32;
    c.scaling.original_max_position_embeddings = 4096;
    for (int i = 0; i < dim / 2; ++i) {
      c.scaling.short_factors.push_back(1.0 + 0.01 * i);
      c.scaling.long_factors.push_back(1.0 + 2.0 * i);
    }
    auto rope = RopeCache::Create(c);
    ASSERT_TRUE(rope.ok()) << rope.status();
    EXPECT_NEAR(rope->attention_factor(),
                std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-6);
    const std::vector<float> at_orig = rope->InvFreq(4096);
    const std::vector<float> past = rope->InvFreq(4097);
    for (int i = 0; i < dim / 2; ++i) {
      const double s = f0[i] / c.scaling.short_factors[i];
      const double l = f0[i] / c.scaling.long_factors[i];
      EXPECT_NEAR(at_orig[i], s, 1e-6 * s) << i;
      EXPECT_NEAR(past[i], l, 1e-6 * l) << i;
    }
    // Positions decide: a batch reaching position 4096 (length 4097) rotates
    // with the long factors.
    std::vector<float> cs;
    ASSERT_TRUE(rope->ComputeCosSin({4096}, &cs).ok());
    const float angle = 4096.0f * past[dim / 2 - 1];
    EXPECT_NEAR(cs[dim / 2 - 1],
                std::cos(static_cast<double>(angle)) * rope->attention_factor(),
                1e-6);
    c.scaling.attention_factor = 1.25;
    EXPECT_FLOAT_EQ(RopeCache::Create(c)->attention_factor(), 1.25f);
    c.scaling.long_factors.pop_back();
    EXPECT_FALSE(RopeCache::Create(c).ok());
  }
}

// Per-dimension divisors (a GGUF file's rope_freqs) reproduce Llama 3.1
// scaling when they hold the factors llama.cpp's converter derives from it.
TEST(RopeTest, FreqFactorsDivideInverseFrequencies) {
  const int dim = 64;
  RopeConfig llama3;
  llama3.head_dim = dim;
  llama3.theta = 500000.0;
  llama3.max_position_embeddings = 131072;
  llama3.scaling.type = RopeScalingType::kLlama3;
  llama3.scaling.factor = 8;
  llama3.scaling.low_freq_factor = 1;
  llama3.scaling.high_freq_factor = 4;
  llama3.scaling.original_max_position_embeddings = 8192;
  RopeConfig factors = llama3;
  factors.scaling = RopeScaling();
  int scaled = 0;
  for (double f : DefaultInvFreq(500000.0, dim)) {
    const double wavelen = 2 * M_PI / f;
    double r = 1;
    if (wavelen > 8192.0) {
      r = 8;
    } else if (wavelen >= 8192.0 / 4) {
      const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      r = 1 / ((1 - smooth) / 8 + smooth);
    }
    scaled += r != 1 ? 1 : 0;
    // Stored as F32 in the file.
    factors.scaling.freq_factors.push_back(static_cast<float>(r));
  }
  EXPECT_GT(scaled, 4);
  const std::vector<float> want = RopeCache::Create(llama3)->InvFreq();
  auto rope = RopeCache::Create(factors);
  ASSERT_TRUE(rope.ok()) << rope.status();
  const std::vector<float> got = rope->InvFreq();
  for (int i = 0; i < dim / 2; ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-7 * want[i]) << i;
  }
  factors.scaling.freq_factors.resize(dim / 2 - 1);
  EXPECT_FALSE(RopeCache::Create(factors).ok());
  factors.scaling.freq_factors.assign(dim / 2, 0.0);
  EXPECT_FALSE(RopeCache::Create(factors).ok());
}

class RopeApplyTest : public IsaCapTest {};

TEST_P(RopeApplyTest, RotatesPairsByPositionTimesFrequency) {
  for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kGptJ}) {
    for (int rotary_dim : {64, 32}) {  // full and partial rotary
      const int d = 64, hq = 4, hk = 2;
      RopeConfig c;
      c.head_dim = d;
      c.rotary_dim = rotary_dim;
      c.style = style;
      auto rope = RopeCache::Create(c);
      ASSERT_TRUE(rope.ok());
      std::vector<int32_t> pos = {0, 5, 1000, 3};
      const int64_t t = pos.size();
      std::vector<float> q = RandomVector(t * hq * d, 1), k = RandomVector(t * hk * d, 2);
      std::vector<float> q0 = q, k0 = k;
      ASSERT_TRUE(ApplyRope(kOpt, *rope, TensorView::Contiguous(pos.data(), DType::kI32, {t}),
                            View2(q.data(), t, hq * d), View2(k.data(), t, hk * d)).ok());
      const std::vector<double> f = DefaultInvFreq(10000, rotary_dim);
      auto check = [&](const std::vector<float>& before, const std::vector<float>& after, int heads) {
        for (int64_t r = 0; r < t; ++r) {
          for (int h = 0; h < heads; ++h) {
            const float* b = &before[(r * heads + h) * d];
            const float* a = &after[(r * heads + h) * d];
            for (int i = 0; i < rotary_dim / 2; ++i) {
              const int ia = style == RopeStyle::kNeox ? i : 2 * i;
              const int ib = style == RopeStyle::kNeox ? i + rotary_dim / 2 : 2 * i + 1;
              const double ang = pos[r] * f[i];
              ASSERT_NEAR(a[ia], b[ia] * std::cos(ang) - b[ib] * std::sin(ang), 2e-4);
              ASSERT_NEAR(a[ib], b[ib] * std::cos(ang) + b[ia] * std::sin(ang), 2e-4);
            }
            for (int e = rotary_dim; e < d; ++e) ASSERT_EQ(a[e], b[e]);
          }
        }
      };
      check(q0, q, hq);
      check(k0, k, hk);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, RopeApplyTest, INFERD_ALL_ISAS, testing_util::IsaParamName);

TEST(OpsValidationTest, RejectsMismatchedShapes) {
  std::vector<float> x(12), w(12), y(12);
  EXPECT_EQ(Linear(kOpt, View2(x.data(), 3, 4), View2(w.data(), 4, 3), TensorView{},
                   View2(y.data(), 3, 4)).code(),
            absl::StatusCode::kInvalidArgument);
  AttentionParams p;
  p.num_heads = 3;
  p.num_kv_heads = 2;
  p.head_dim = 4;
  std::vector<int32_t> cu = {0, 1};
  EXPECT_EQ(VarlenAttention(kOpt, View2(x.data(), 1, 12), View2(w.data(), 1, 8), View2(w.data(), 1, 8),
                            TensorView::Contiguous(cu.data(), DType::kI32, {2}), p, View2(y.data(), 1, 12)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd
