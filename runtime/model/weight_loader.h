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
  // Copies shared with the store's other consumers (WeightStore::Packed).
  std::vector<std::shared_ptr<const void>> shared;
  int64_t bytes_allocated = 0;  // converted / copied weights
  int64_t bytes_mapped = 0;     // weights used in place from the mapping
};

class WeightLoader {
 public:
  // `store`, `device` and `out` must outlive the loader; `store` must also
  // outlive every view handed out. `linear_dtype` is F32 or BF16, a
  // block-quantized type to quantize float GEMM weights at load, or I8 (the
  // encoders' dtype=int8): GEMM weights as Q8_0, int8 values with a scale
  // per block of 32 inputs.
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

  // LinearWeight also keeps a copy of each GEMM weight in the device's
  // packed layout (PackLinearWeight) until the copies reach max_bytes:
  // encoders, whose forward passes are all large GEMMs, trade that memory
  // (F32: the weights once more; int8: 1.25 bytes per value) for not
  // repacking per call. 0 (the default): no copies.
  void set_pack_linear_budget(int64_t max_bytes) { pack_budget_ = max_bytes; }
  // The int8 activation policy: every block-quantized GEMM weight is also
  // repacked into the device's int8 layout (PackLinearWeight under
  // ActivationPrecision::kInt8; about the bytes of the weight), outside the
  // budget above. LinearWeight shares the copy of a tensor used in place
  // through the store (a model's replicas pack it once) and gives the
  // stored bytes' memory back (WeightStore::ReleaseStored): the Linear
  // kernels read only the copy under that policy.
  void set_int8_panels(bool on) { int8_panels_ = on; }
  // Whether attention layers load q, k and v as one fused GEMM weight
  // (FusedLinearWeight): one GEMM (and one int8 quantization of x) instead
  // of three, for a copy of those weights. Encoders turn it on.
  void set_fuse_qkv(bool on) { fuse_qkv_ = on; }
  bool fuse_qkv() const { return fuse_qkv_; }

  // A GEMM weight [out, in] in linear_dtype (Q8_0 when linear_dtype is I8).
  absl::StatusOr<TensorView> LinearWeight(absl::string_view full_name,
                                          int64_t out, int64_t in);
  // The GEMM weights `names` [outs[i], in] as LinearWeight gives them,
  // stacked into one [sum outs, in] weight (a copy, packed like
  // LinearWeight); nullopt when they do not share a dtype (then load them
  // one by one).
  absl::StatusOr<absl::optional<TensorView>> FusedLinearWeight(
      const std::vector<std::string>& names, const std::vector<int64_t>& outs,
      int64_t in);
  // F32 vectors `names` [outs[i]] stacked into one (a copy).
  absl::StatusOr<TensorView> FusedF32(const std::vector<std::string>& names,
                                      const std::vector<int64_t>& outs);
  // An F32 tensor of the given shape (norm weights, biases).
  absl::StatusOr<TensorView> F32(absl::string_view full_name,
                                 std::initializer_list<int64_t> shape);
  // An embedding table [rows, cols] in `want` (F32 or BF16); without
  // `want`, F32 or BF16 as stored (F16 becomes F32).
  absl::StatusOr<TensorView> Table(absl::string_view full_name, int64_t rows,
                                   int64_t cols,
                                   absl::optional<DType> want = absl::nullopt);

  // w with a packed copy (int8 panels, or within the budget; w itself
  // otherwise): for GEMM weights loaded another way (a tied embedding
  // table as the LM head).
  absl::StatusOr<TensorView> WithPacked(TensorView w);

 private:
  // LinearWeight without the packed copy.
  absl::StatusOr<TensorView> UnpackedLinearWeight(absl::string_view full_name,
                                                  int64_t out, int64_t in);
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
  int64_t pack_budget_ = 0;
  bool fuse_qkv_ = false;
  bool int8_panels_ = false;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_WEIGHT_LOADER_H_
