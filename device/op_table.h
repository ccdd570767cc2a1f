// OpTable: the per-device kernel entry points behind device/ops.h, one
// member per op of device/op_list.h. ops.cc validates arguments and resolves
// defaults before calling a kernel, so kernels may assume well-formed
// shapes/dtypes (they still validate data that lives in tensors, such as ids
// and block tables). Fused layouts reach the kernels as strided views (e.g.
// [gate|up] becomes two views). Tables are immutable; kernels are
// thread-safe.
#ifndef INFERD_DEVICE_OP_TABLE_H_
#define INFERD_DEVICE_OP_TABLE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/device.h"
#include "device/op_list.h"
#include "device/ops.h"
#include "device/tensor.h"

namespace inferd {

class ThreadPool;

struct KernelContext {
  Device* device = nullptr;
  ThreadPool* pool = nullptr;  // nullptr: run serially on the caller
  bool decode_rows = false;    // ExecutionContext::decode_rows
  ActivationPrecision activations = ActivationPrecision::kExact;
};

// A nullptr entry: ops.cc runs the reference kernel instead (host memory
// only), or for an optional op does without it.
struct OpTable {
#define INFERD_OP_TABLE_MEMBER(member, Kernel, Return, params) \
  Return(*member) INFERD_KERNEL_PARAMS params = nullptr;
  INFERD_OPS(INFERD_OP_TABLE_MEMBER)
  INFERD_OPTIONAL_OPS(INFERD_OP_TABLE_MEMBER)
#undef INFERD_OP_TABLE_MEMBER
};

// The plain-loop kernels (device/ref/): every op of INFERD_OPS, none of
// INFERD_OPTIONAL_OPS; host memory only.
const OpTable& ReferenceOpTable();

}  // namespace inferd

#endif  // INFERD_DEVICE_OP_TABLE_H_
