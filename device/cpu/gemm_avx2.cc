// Portable blocked GEMM for Linear/MatMul, built for the avx2 level
// (see gemm_generic_impl.h).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "device/cpu/gemm.h"

namespace inferd {
namespace cpu_avx2 {
namespace {

constexpr int kNr = 16;
constexpr int kMr = 6;

template <int MR>
void MicroF32(int64_t kc, const float* a, int64_t lda, const float* bp,
              float* c, int64_t ldc, int nvalid, bool init, const float* bias);
void GemvRows(const GemmArgs& g, int64_t n_begin, int64_t n_end);

#include "device/cpu/gemm_driver_impl.h"
#include "device/cpu/gemm_generic_impl.h"

}  // namespace

void Gemm(ThreadPool* pool, const GemmArgs& args) { RunGemmF32(pool, args); }

}  // namespace cpu_avx2
}  // namespace inferd
