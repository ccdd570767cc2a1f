// AVX-512 build of the tiled attention kernel (attention_impl.h); called only
// when the CPU supports AVX-512 (attention_cpu.cc checks).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "device/cpu/attention.h"
#include "device/cpu/fast_math.h"

namespace inferd {
namespace cpu_avx512 {
namespace {
#include "device/cpu/attention_impl.h"
}  // namespace

int64_t AttendScratchFloatsIsa(int64_t rows, int head_dim) {
  return AttendScratchFloats(rows, head_dim);
}

void AttendTileIsa(const AttnJob& job, int64_t q_begin, int64_t q_end,
                   float* scratch) {
  AttendTile(job, q_begin, q_end, scratch);
}

}  // namespace cpu_avx512
}  // namespace inferd
