// TorchStateDict reader: the tensors of a PyTorch `torch.save(state_dict)`
// file (the zip format torch writes since 1.6), read without running any
// pickle code.
//
// Layout of such a file: an uncompressed ("stored") zip archive whose
// entries share one top-level folder (e.g. "archive/"):
//   <folder>/data.pkl     the pickled object (protocol 2)
//   <folder>/data/<key>   the raw bytes of each tensor storage
//   <folder>/byteorder    "little" (absent in files older than torch 2.1)
//   <folder>/version      the format version
// data.pkl is interpreted by a small, strict pickle machine: only the
// opcodes needed to rebuild a dict of tensors are accepted, and only these
// globals may be named: collections.OrderedDict,
// torch._utils._rebuild_tensor_v2 and torch.{Float,Half,BFloat16}Storage.
// Nothing is imported or called: a REDUCE of _rebuild_tensor_v2 records the
// storage, offset, size and stride; anything else (os.system, builtins.eval,
// an unknown opcode) is refused with INVALID_ARGUMENT naming it.
//
// Pure functions; thread-safe.
#ifndef INFERD_RUNTIME_LOADER_TORCH_PICKLE_H_
#define INFERD_RUNTIME_LOADER_TORCH_PICKLE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inferd {

// One tensor, converted to float32 and made contiguous (row-major).
struct FloatTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
  // The stored element type: "float32", "float16" or "bfloat16".
  std::string stored_dtype;
};

// Reads the state dict (name -> tensor) of the torch zip file at `path`.
// NOT_FOUND when the file does not exist; INVALID_ARGUMENT (naming the
// file and what is wrong) for anything malformed or not allowed.
absl::StatusOr<std::map<std::string, FloatTensor>> ReadTorchStateDict(
    const std::string& path);

// The same from the file's bytes; `display_name` stands in for the path in
// error messages.
absl::StatusOr<std::map<std::string, FloatTensor>> ParseTorchStateDict(
    absl::string_view bytes, absl::string_view display_name);

// The pickle machine alone, for tests: interprets `pickle` and returns the
// tensors it describes, taking storage bytes from `storages` (key -> raw
// little-endian bytes).
absl::StatusOr<std::map<std::string, FloatTensor>> UnpickleStateDict(
    absl::string_view pickle,
    const std::map<std::string, std::string>& storages,
    absl::string_view display_name);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_TORCH_PICKLE_H_
