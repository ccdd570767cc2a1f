// libFuzzer target: arbitrary bytes parsed as a safetensors file. Every
// input must yield either an error status or a file whose tensor views lie
// inside the buffer; touching each view's bytes lets ASan catch lies.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "runtime/loader/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = inferd::SafetensorsFile::FromBuffer(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!file.ok()) return 0;
  uint64_t sum = 0;
  for (const std::string& name : (*file)->Names()) {
    const inferd::SafetensorsTensorInfo* info = (*file)->Find(name);
    if (info == nullptr) __builtin_trap();
    for (uint64_t i = 0; i < info->nbytes(); ++i) sum += info->data[i];
    auto view = (*file)->Get(name);
    if (view.ok() && view->nbytes() != info->nbytes()) __builtin_trap();
  }
  // Keep the reads alive.
  if (sum == 0xdeadbeefcafef00dull) return 1;
  return 0;
}
