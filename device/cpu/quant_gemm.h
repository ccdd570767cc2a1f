// Internal interface between the quantized/F16-weight Linear kernel
// (quant_linear_cpu.cc) and its ISA-specific translation units. The
// functions are thread-safe; the args are read-only.
#ifndef INFERD_DEVICE_CPU_QUANT_GEMM_H_
#define INFERD_DEVICE_CPU_QUANT_GEMM_H_

#include <cstddef>
#include <cstdint>

#include "device/cpu/thread_pool.h"
#include "device/tensor.h"

namespace inferd {

// y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]) for W an F16 or
// block-quantized [n, k] weight whose row r starts at w + r * row_bytes.
struct QuantGemmArgs {
  DType dtype = DType::kF16;
  const float* x = nullptr;
  int64_t ldx = 0;
  const uint8_t* w = nullptr;
  size_t row_bytes = 0;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t m = 0, n = 0, k = 0;
  // Q4_0, Q4_1 and Q4_K (whose values carry an offset) below the avx512
  // level: xsum[i * (k / 32) + b] = sum of x[i, 32 b .. 32 b + 32); null for
  // the other dtypes and at avx512 (its kernels fold the offsets into
  // per-block tables).
  const float* xsum = nullptr;
  // The int8 activation policy (ActivationPrecision::kInt8): GemvVnniRows
  // reads one-level int8 x (else 16-bit), QuantGemmVnni quantizes Q4_K /
  // Q6_K activations per super-block of 256 as ggml's q8_K (else per 32).
  bool int8_x = false;
  // GemvVnniRows (M = 1, or M < 8 under the int8 policy): x as
  // GemvVnniQuantizeX leaves it (with int8 = int8_x), row i at xq + i *
  // xq_stride (null otherwise).
  const uint8_t* xq = nullptr;
  int64_t xq_stride = 0;
  // Weights packed by cpu_avx512::PackVnniWeights: QuantGemmVnni reads its
  // panels instead of unpacking each per call (null: unpack).
  const uint8_t* packed = nullptr;
};

// Whether a dtype needs QuantGemmArgs::xsum.
inline bool QuantNeedsXSum(DType dtype) {
  return dtype == DType::kQ4_0 || dtype == DType::kQ4_1 ||
         dtype == DType::kQ4_K;
}

// Weight rows [n_begin, n_end) of y, all m activation rows (M up to the
// small-M limit of quant_linear_cpu.cc): weights are
// decoded in registers (or, at avx512 for m >= 2, into an L1 panel) with F32
// math, each weight byte read from memory once for all of x.
namespace cpu_avx2 {
void QuantGemmRows(const QuantGemmArgs& args, int64_t n_begin, int64_t n_end);
}  // namespace cpu_avx2
namespace cpu_avx512 {
void QuantGemmRows(const QuantGemmArgs& args, int64_t n_begin, int64_t n_end);
// Whether QuantGemmVnni handles dtype on this CPU (Q8_0, Q4_0, Q4_1, Q4_K,
// Q6_K with AVX512_VNNI).
bool QuantVnniSupports(DType dtype);
// y = x W^T (+ bias), all of it, with int8 dot products (vpdpbusd): x
// quantized per block of 32 to int8 once per call (as ggml's q8_0), weight
// panels of 32 rows unpacked once each; work split over panels on `pool`.
// Error: that of the activation rounding, sum_k |w_k| dx_k / 2 (dx = the
// block's max |x| / 127), plus F32 rounding.
void QuantGemmVnni(ThreadPool* pool, const QuantGemmArgs& args);
// Bytes of all panels of an [n][k] weight of dtype (QuantVnniSupports).
int64_t VnniPackedBytes(DType dtype, int64_t n, int64_t k);
// Unpacks every panel of args.w (dtype, n, k, row_bytes) into out
// (VnniPackedBytes, 64-byte aligned), panels split over `pool`.
void PackVnniWeights(ThreadPool* pool, const QuantGemmArgs& args, uint8_t* out);
// Decode GEMV with int8 dot products for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K
// and Q6_K: x is quantized per block of 32 (per super-block of 256 for
// Q4_K / Q6_K) to v = round(x / sx), and vpdpbusd takes the weight bytes as
// GGUF stores them (no repacking). Two precisions:
// - 16-bit (the exact activation policy, M = 1): sx = the block's max |x| /
//   32512, v stored as two int8 levels v = 256 h + l; error sum_k |w_k|
//   sx_k / 2 (256 times below an int8 activation's) plus F32 rounding;
// - int8 (the int8 policy, as llama.cpp's q8_0 / q8_1 / q8_K): sx = max |x|
//   / 127, one level, half the dot products; error sum_k |w_k| sx_k / 2.
// Each activation row's outputs are computed alone, the same at any M.
// Whether GemvVnniRows handles dtype on this CPU (the seven formats above,
// with AVX512_VNNI).
bool GemvVnniSupports(DType dtype);
// Bytes of the activation buffer GemvVnniQuantizeX fills for k values.
int64_t GemvVnniXBytes(int64_t k);
// Quantizes x[0, k) (k a multiple of the dtype's block) into xq (GemvVnniXBytes(k) bytes,
// 64-byte aligned) in the layout the kernel for dtype reads: the int8
// levels (two, or one when int8), sx and sx sum v per block.
void GemvVnniQuantizeX(DType dtype, const float* x, int64_t k, bool int8, uint8_t* xq);
// Weight rows [n_begin, n_end) of y = x W^T (+ bias), all args.m rows, with
// args.xq from GemvVnniQuantizeX (each weight row read from memory once).
void GemvVnniRows(const QuantGemmArgs& args, int64_t n_begin, int64_t n_end);
// x quantized to int8 as the int8 panels read it, which is llama.cpp's
// quantization of activations: per block of 32 (its q8_0 / q8_1), v = x *
// (127 / max |x|) rounded to nearest even, the step max |x| / 127 kept
// rounded to F16 (dx) and dxs = F16(step sum(v)) with the unrounded step;
// per super-block of 256 when superblocks (its q8_K: the step in F32,
// stored for each of its blocks of 32). Row i's values at q + i * k, steps
// at dx + i * (k / 32); per weight block (16 values when halves, else 32)
// xoff = c sum(v) when xoff is given, else dxs. Rows split over `pool`.
void QuantizeXInt8(ThreadPool* pool, const QuantGemmArgs& args, int32_t c, bool halves,
                   bool superblocks, int8_t* q, float* dx, float* dxs, int32_t* xoff);
// ---- The int8 policy on weights repacked at load (int8_panels_avx512.cc) --
// Panels of 16 weight rows laid out for vpdpbusd, scales beside them at
// their stored precision (about the bytes of the rows as stored). One
// kernel for every M: each output is computed by the same operations
// whatever the batch, so a row's result does not depend on M. Activations
// are quantized as QuantGemmVnni's under the int8 policy (per 32; per 256
// for the K-quants).
// Whether the panels hold dtype ([n][k], the seven block formats) on this
// CPU (AVX512_VNNI).
bool Int8PanelsSupport(DType dtype, int64_t k);
// Bytes of the panels of an [n][k] weight.
int64_t Int8PanelsBytes(DType dtype, int64_t n, int64_t k);
// Repacks args.w (dtype, n, k, row_bytes) into out (Int8PanelsBytes,
// 64-byte aligned); panels split over `pool`.
void PackInt8Panels(ThreadPool* pool, const QuantGemmArgs& args, uint8_t* out);
// y = x W^T (+ bias) from the panels at args.packed, any M.
void Int8PanelsGemm(ThreadPool* pool, const QuantGemmArgs& args);
// Weight rows [n0, n0 + rows) as F32 (DequantizeRow's values), row r at
// out + r * args.k.
void DecodeRowsF32(const QuantGemmArgs& args, int64_t n0, int64_t rows,
                   float* out);
}  // namespace cpu_avx512

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_QUANT_GEMM_H_
