// Internal interface between the Linear/MatMul kernels (linear_cpu.cc) and
// their ISA-specific GEMM translation units. Not thread-safe to mutate;
// the functions are thread-safe (scratch is per thread).
#ifndef INFERD_DEVICE_CPU_GEMM_H_
#define INFERD_DEVICE_CPU_GEMM_H_

#include <cstdint>

#include "device/cpu/thread_pool.h"
#include "device/tensor.h"

namespace inferd {

// y[m, n] = sum_k x[m, k] * B(n, k) (+ bias[n]), where B(n, k) is
// w[n * ldw + k] (w_layout_nk, HF weight layout) or w[k * ldw + n].
struct GemmArgs {
  const float* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  bool w_bf16 = false;
  // cpu_avx512 only, [n][k] weights, m > 8: F16 weights, widened to F32 as
  // the GEMM packs them.
  bool w_f16 = false;
  bool w_layout_nk = true;
  int64_t ldw = 0;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t m = 0, n = 0, k = 0;
  // cpu_avx512 only, F32 [n][k] weights: W packed by PackF32Panels (panel
  // p of 32 columns at packed + p * k * 32, [k][32]); GEMMs with more rows
  // than the GEMV path read it instead of packing W per call.
  const float* packed = nullptr;
  // cpu_avx512 only, BF16 [n][k] weights under vdpbf16ps: W packed by
  // PackBf16Pairs (panel p of 32 columns at packed_pairs + p * kp * 32,
  // [kp][32] K pairs, kp = (k + 1) / 2); GEMMs with more rows than the GEMV
  // path read it instead of pairing W per call.
  const uint32_t* packed_pairs = nullptr;
};

// A buffer of PackLinear (linear_cpu.cc): this header, then the panels at
// kPackedHeaderBytes.
enum class PackedFormat : uint32_t {
  kF32Panels = 1,
  kVnniPanels = 2,
  kInt8Panels = 3,
  kBf16Pairs = 4,
};
struct PackedLinearHeader {
  uint32_t magic = 0;
  PackedFormat format = PackedFormat::kF32Panels;
  DType dtype = DType::kF32;
  int64_t n = 0, k = 0;
};
inline constexpr uint32_t kPackedLinearMagic = 0x6b636170;  // "pack"
inline constexpr size_t kPackedHeaderBytes = 64;

namespace cpu_avx512 {
// use_bf16_dot: BF16 weights use vdpbf16ps (activations rounded to BF16)
// for the compute-bound shapes; requires AVX512_BF16.
void Gemm(ThreadPool* pool, const GemmArgs& args, bool use_bf16_dot);
// vdpbf16ps FLOP/s over FMA FLOP/s on the calling core: register-only loops
// of each instruction, best of several alternating runs. Requires
// AVX512_BF16.
double MeasureBf16DotToFmaRate();
// Floats of GemmArgs::packed for an [n][k] weight.
int64_t PackedF32Floats(int64_t n, int64_t k);
// Packs g.w (F32, [n][k]) into out (PackedF32Floats floats, 64-byte
// aligned), panels split over `pool`.
void PackF32Panels(ThreadPool* pool, const GemmArgs& g, float* out);
// 32-bit words of GemmArgs::packed_pairs for an [n][k] BF16 weight.
int64_t PackedBf16PairWords(int64_t n, int64_t k);
// Packs g.w (BF16, [n][k]) into out (PackedBf16PairWords words, 64-byte
// aligned), panels split over `pool`.
void PackBf16Pairs(ThreadPool* pool, const GemmArgs& g, uint32_t* out);
}  // namespace cpu_avx512
namespace cpu_avx2 {
void Gemm(ThreadPool* pool, const GemmArgs& args);
}  // namespace cpu_avx2
namespace cpu_scalar {
void Gemm(ThreadPool* pool, const GemmArgs& args);
}  // namespace cpu_scalar

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_GEMM_H_
