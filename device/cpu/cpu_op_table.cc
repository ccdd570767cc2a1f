#include "device/cpu/cpu_device.h"
#include "device/cpu/kernels.h"
#include "device/op_list.h"

namespace inferd {

// Every op, optional ones included.
const OpTable& CpuOpTable() {
  static const OpTable table = [] {
    OpTable t;
#define INFERD_CPU_KERNEL(member, Kernel, Return, params) \
  t.member = &cpu::Kernel;
    INFERD_OPS(INFERD_CPU_KERNEL)
    INFERD_OPTIONAL_OPS(INFERD_CPU_KERNEL)
#undef INFERD_CPU_KERNEL
    return t;
  }();
  return table;
}

}  // namespace inferd
