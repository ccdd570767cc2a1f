// WeightLoader: turns named checkpoint tensors into the views a layer
// computes with. A tensor whose stored dtype is the one wanted (and whose
// address is aligned for that dtype) is used in place, zero-copy, inside the
// memory mapping; otherwise it is converted once into a device buffer owned
// by a WeightBuffers object, whose byte count is tracked.
// Not thread-safe; used while a model loads.
#ifndef INFERD_RUNTIME_MODEL_WEIGHT_LOADER_H_
#define INFERD_RUNTIME_MODEL_WEIGHT_LOADER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "device/device.h"
#include "device/tensor.h"
#include "runtime/loader/weights.h"

namespace inferd {

// Buffers holding converted weights, and what loading cost. Move-only.
struct WeightBuffers {
  std::vector<DeviceBuffer> buffers;
  int64_t bytes_allocated = 0;  // converted / copied weights
  int64_t bytes_mapped = 0;     // weights used in place from the mapping
};

class WeightLoader {
 public:
  // `store`, `device` and `out` must outlive the loader; `store` must also
  // outlive every view handed out. `linear_dtype` is F32 or BF16, a
  // block-quantized type to quantize float GEMM weights at load, or I8 for
  // per-channel int8 weights (Int8LinearWeight).
  WeightLoader(const WeightStore* store, Device* device, DType linear_dtype,
               WeightBuffers* out);

  // Sets the prefix of the base model's tensors ("", "bert.", "model.", ...)
  // to the first of kCommonWeightPrefixes under which `probe` exists.
  // NOT_FOUND naming the candidates otherwise.
  absl::Status DetectPrefix(absl::string_view probe);
  const std::string& prefix() const { return prefix_; }
  // prefix() + name.
  std::string Base(absl::string_view name) const;

  bool Has(absl::string_view full_name) const;

  DType linear_dtype() const { return linear_dtype_; }

  // A GEMM weight [out, in] in linear_dtype (F32 when linear_dtype is I8:
  // int8 weights come from Int8LinearWeight, for LinearLayer only).
  absl::StatusOr<TensorView> LinearWeight(absl::string_view full_name,
                                          int64_t out, int64_t in);
  // A GEMM weight [out, in] quantized at load to int8 per output row
  // (device/int8.h): the I8 weight and its F32 scales [out].
  struct Int8Weight {
    TensorView weight;
    TensorView scale;
  };
  absl::StatusOr<Int8Weight> Int8LinearWeight(absl::string_view full_name,
                                              int64_t out, int64_t in);
  // An F32 tensor of the given shape (norm weights, biases).
  absl::StatusOr<TensorView> F32(absl::string_view full_name,
                                 std::initializer_list<int64_t> shape);
  // An embedding table [rows, cols] in `want` (F32 or BF16); without
  // `want`, F32 or BF16 as stored (F16 becomes F32).
  absl::StatusOr<TensorView> Table(absl::string_view full_name, int64_t rows,
                                   int64_t cols,
                                   absl::optional<DType> want = absl::nullopt);

 private:
  // The stored view after shape checks.
  absl::StatusOr<TensorView> Stored(absl::string_view full_name,
                                    std::initializer_list<int64_t> shape);
  // Block-quantized weights (and F16 ones of a GGUF store) are computed
  // with as stored.
  bool KeepAsStored(const TensorView& src) const;
  absl::StatusOr<TensorView> InPlace(const TensorView& src);
  // A float32 copy of a block-quantized tensor.
  absl::StatusOr<TensorView> Dequantized(absl::string_view full_name,
                                         const TensorView& src);
  // `src` quantized to the block type `dtype` at load (rows that are not a
  // whole number of blocks stay float32).
  absl::StatusOr<TensorView> Quantized(absl::string_view full_name,
                                       const TensorView& src, DType dtype);
  // `src` as `dtype`: in place when possible, else converted.
  absl::StatusOr<TensorView> As(absl::string_view full_name,
                                const TensorView& src, DType dtype);

  const WeightStore* store_;
  Device* device_;
  DType linear_dtype_;
  WeightBuffers* out_;
  std::string prefix_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_WEIGHT_LOADER_H_
