// Internal: ISA builds of the activation / gated-activation / softmax row
// kernels (elementwise_avx512.cc, elementwise_avx2.cc), picked at run time by
// elementwise_cpu.cc. Tables are immutable; the kernels are thread-safe.
#ifndef INFERD_DEVICE_CPU_ELEMENTWISE_H_
#define INFERD_DEVICE_CPU_ELEMENTWISE_H_

#include <cstdint>

namespace inferd {

// Row kernels indexed by static_cast<int>(Activation).
struct VecRowKernels {
  static constexpr int kNumActivations = 5;
  void (*act[kNumActivations])(const float* x, float* out, int64_t n);
  void (*gated[kNumActivations])(const float* gate, const float* up, float* out,
                                 int64_t n);
  void (*softmax)(const float* x, float* out, int64_t n);
};

namespace cpu_avx512 {
const VecRowKernels& RowKernels();
}  // namespace cpu_avx512
namespace cpu_avx2 {
const VecRowKernels& RowKernels();
}  // namespace cpu_avx2

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_ELEMENTWISE_H_
