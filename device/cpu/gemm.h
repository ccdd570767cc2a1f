// Internal interface between the Linear/MatMul kernels (linear_cpu.cc) and
// their ISA-specific GEMM translation units. Not thread-safe to mutate;
// the functions are thread-safe (scratch is per thread).
#ifndef INFERD_DEVICE_CPU_GEMM_H_
#define INFERD_DEVICE_CPU_GEMM_H_

#include <cstdint>

#include "device/cpu/thread_pool.h"

namespace inferd {

// y[m, n] = sum_k x[m, k] * B(n, k) (+ bias[n]), where B(n, k) is
// w[n * ldw + k] (w_layout_nk, HF weight layout) or w[k * ldw + n].
struct GemmArgs {
  const float* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  bool w_bf16 = false;
  bool w_layout_nk = true;
  int64_t ldw = 0;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t m = 0, n = 0, k = 0;
};

namespace cpu_avx512 {
// use_bf16_dot: BF16 weights use vdpbf16ps (activations rounded to BF16)
// for the compute-bound shapes; requires AVX512_BF16.
void Gemm(ThreadPool* pool, const GemmArgs& args, bool use_bf16_dot);

// B panel width of the vdpbf16ps GEMM: columns per packed panel.
constexpr int64_t kBf16PanelCols = 32;
// K values per packed block of the vdpbf16ps GEMM (even, a multiple of 256:
// every ggml super-block lies inside one K block).
constexpr int64_t kBf16BlockK = 512;

// Writes B(n0 .. n0 + nc, k0 .. k0 + kc) (kc <= kBf16BlockK) as BF16 pair
// panels: with kcp = (kc + 1) / 2, the pair (B(n, k0 + 2 kp),
// B(n, k0 + 2 kp + 1)) of column n = n0 + p + j (p a multiple of
// kBf16PanelCols) is the 32-bit word bp[p * kcp + kp * kBf16PanelCols + j],
// low half first; columns past nc and the odd K value past kc are zero.
// Called concurrently from pool threads with disjoint outputs.
using PackBf16PairsFn = void (*)(const void* ctx, int64_t n0, int64_t nc,
                                 int64_t k0, int64_t kc, uint32_t* bp);

// y = x B^T (+ bias) with the blocked vdpbf16ps GEMM (activations rounded
// to BF16 once), B produced block by block by `pack` (each B value packed
// once per call when M fits one task's rows): for weights stored in another
// format (quantized, F16) that decode straight into the panels. args.w,
// w_bf16 and ldw are unused; requires AVX512_BF16 and args.k > 0.
void GemmBf16Packed(ThreadPool* pool, const GemmArgs& args,
                    PackBf16PairsFn pack, const void* pack_ctx);
}  // namespace cpu_avx512
namespace cpu_avx2 {
void Gemm(ThreadPool* pool, const GemmArgs& args);
}  // namespace cpu_avx2
namespace cpu_scalar {
void Gemm(ThreadPool* pool, const GemmArgs& args);
}  // namespace cpu_scalar

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_GEMM_H_
