// AVX-512 build of the activation and softmax row kernels
// (vec_math_impl.h); called only when the CPU supports AVX-512.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "device/cpu/elementwise.h"
#include "device/ops.h"

namespace inferd {
namespace cpu_avx512 {
namespace {

#include "device/cpu/vec_avx512_impl.h"
#include "device/cpu/vec_math_impl.h"

}  // namespace

const VecRowKernels& RowKernels() {
  static const VecRowKernels k = {
      {&ActRowVec<Activation::kSilu>, &ActRowVec<Activation::kGeluErf>,
       &ActRowVec<Activation::kGeluTanh>, &ActRowVec<Activation::kRelu>,
       &ActRowVec<Activation::kTanh>},
      {&GatedRowVec<Activation::kSilu>, &GatedRowVec<Activation::kGeluErf>,
       &GatedRowVec<Activation::kGeluTanh>, &GatedRowVec<Activation::kRelu>,
       &GatedRowVec<Activation::kTanh>},
      &SoftmaxRowVec};
  return k;
}

}  // namespace cpu_avx512
}  // namespace inferd
