#include "runtime/model/workspace.h"

#include <algorithm>
#include <utility>

#include "runtime/common/status_macros.h"

namespace inferd {

Workspace::Workspace(Device* device)
    : device_(device), buffers_(static_cast<size_t>(WsSlot::kCount)) {}

absl::StatusOr<TensorView> Workspace::Get(WsSlot slot, int64_t rows,
                                          int64_t cols, DType dtype) {
  DeviceBuffer& buffer = buffers_[static_cast<size_t>(slot)];
  const size_t needed =
      static_cast<size_t>(std::max<int64_t>(rows * cols, 1)) * DTypeSize(dtype);
  if (buffer.data() == nullptr || buffer.size() < needed) {
    const size_t grown = std::max(needed, buffer.size() + buffer.size() / 4);
    const size_t rounded = (grown + 63) / 64 * 64;
    buffer = DeviceBuffer();  // release first: keeps the peak low
    ASSIGN_OR_RETURN(buffer, DeviceBuffer::Create(device_, rounded, 64));
  }
  return TensorView::Contiguous(buffer.data(), dtype, {rows, cols});
}

int64_t Workspace::bytes_allocated() const {
  int64_t total = 0;
  for (const DeviceBuffer& b : buffers_)
    total += static_cast<int64_t>(b.size());
  return total;
}

}  // namespace inferd
