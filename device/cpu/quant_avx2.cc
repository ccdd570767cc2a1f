// Quantized / F16 weight GEMV and small-M GEMM for Linear at
// the avx2 level (AVX2 + FMA + F16C); see quant_gemm_impl.h.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "device/cpu/quant_gemm.h"

namespace inferd {
namespace cpu_avx2 {
namespace {

#include "device/cpu/quant_gemm_impl.h"

}  // namespace

void QuantGemmRows(const QuantGemmArgs& args, int64_t n_begin, int64_t n_end) {
  QuantGemmRowsImpl(args, n_begin, n_end);
}

}  // namespace cpu_avx2
}  // namespace inferd
