#include "runtime/model/weight_loader.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "device/ops.h"
#include "device/quant.h"
#include "runtime/common/status_macros.h"

namespace inferd {

WeightLoader::WeightLoader(const WeightStore* store, Device* device,
                           DType linear_dtype, WeightBuffers* out)
    : store_(store), device_(device), linear_dtype_(linear_dtype), out_(out) {}

absl::Status WeightLoader::DetectPrefix(absl::string_view probe) {
  ASSIGN_OR_RETURN(std::string found, store_->FindWithPrefixes(probe));
  prefix_ = found.substr(0, found.size() - probe.size());
  return absl::OkStatus();
}

std::string WeightLoader::Base(absl::string_view name) const {
  return absl::StrCat(prefix_, name);
}

bool WeightLoader::Has(absl::string_view full_name) const {
  return store_->Has(full_name);
}

absl::StatusOr<TensorView> WeightLoader::Stored(
    absl::string_view full_name, std::initializer_list<int64_t> shape) {
  ASSIGN_OR_RETURN(TensorView view, store_->Get(full_name));
  bool ok = view.rank == static_cast<int>(shape.size());
  int i = 0;
  for (int64_t d : shape) {
    if (!ok) break;
    ok = view.shape[i++] == d;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight ", full_name, " in ", store_->directory(), " is ",
                     view.DebugString(), "; the config implies [",
                     absl::StrJoin(shape, ", "), "]"));
  }
  if (view.dtype != DType::kF32 && view.dtype != DType::kBF16 &&
      view.dtype != DType::kF16 && !IsBlockQuantized(view.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight ", full_name, " has unsupported dtype ", DTypeName(view.dtype),
        " (need F32, BF16, F16 or a block-quantized type)"));
  }
  return view;
}

bool WeightLoader::KeepAsStored(const TensorView& src) const {
  if (IsBlockQuantized(src.dtype)) return true;
  return src.dtype == DType::kF16 && store_->prefers_stored_dtypes();
}

absl::StatusOr<TensorView> WeightLoader::InPlace(const TensorView& src) {
  out_->bytes_mapped += static_cast<int64_t>(src.nbytes());
  return src;
}

absl::StatusOr<TensorView> WeightLoader::Dequantized(
    absl::string_view full_name, const TensorView& src) {
  TensorView dst = src;
  dst.dtype = DType::kF32;
  ASSIGN_OR_RETURN(DeviceBuffer buffer,
                   DeviceBuffer::Create(device_, dst.nbytes(), 64));
  dst.data = buffer.data();
  const int64_t cols = src.shape[src.rank - 1];
  const int64_t rows = src.numel() / cols;
  const size_t row_bytes = DTypeRowBytes(src.dtype, cols);
  for (int64_t r = 0; r < rows; ++r) {
    absl::Status s = DequantizeRow(
        src.dtype, static_cast<const uint8_t*>(src.data) + r * row_bytes,
        cols, dst.as<float>() + r * cols);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight ", full_name, ": ", s.message()));
    }
  }
  out_->bytes_allocated += static_cast<int64_t>(buffer.size());
  out_->buffers.push_back(std::move(buffer));
  return dst;
}

absl::StatusOr<TensorView> WeightLoader::Quantized(
    absl::string_view full_name, const TensorView& src, DType dtype) {
  const int64_t cols = src.shape[src.rank - 1];
  if (cols % DTypeBlockElements(dtype) != 0) {
    // Rows that do not fill whole blocks keep a float dtype.
    return As(full_name, src, DType::kF32);
  }
  TensorView dst = src;
  dst.dtype = dtype;
  ASSIGN_OR_RETURN(DeviceBuffer buffer,
                   DeviceBuffer::Create(device_, dst.nbytes(), 64));
  dst.data = buffer.data();
  const int64_t rows = src.numel() / cols;
  const size_t src_row_bytes = DTypeRowBytes(src.dtype, cols);
  const size_t row_bytes = DTypeRowBytes(dtype, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    RETURN_IF_ERROR(DequantizeRow(
        src.dtype, static_cast<const uint8_t*>(src.data) + r * src_row_bytes,
        cols, row.data()));
    RETURN_IF_ERROR(QuantizeRow(
        dtype, row.data(), cols,
        static_cast<uint8_t*>(dst.data) + r * row_bytes));
  }
  out_->bytes_allocated += static_cast<int64_t>(buffer.size());
  out_->buffers.push_back(std::move(buffer));
  return dst;
}

absl::StatusOr<TensorView> WeightLoader::As(absl::string_view full_name,
                                            const TensorView& src,
                                            DType dtype) {
  const SafetensorsTensorInfo* info = store_->Info(full_name);
  const size_t alignment = info != nullptr ? info->alignment : 0;
  if (src.dtype == dtype && alignment >= DTypeSize(dtype)) {
    out_->bytes_mapped += static_cast<int64_t>(src.nbytes());
    return src;
  }
  TensorView dst = src;
  dst.dtype = dtype;
  ASSIGN_OR_RETURN(DeviceBuffer buffer,
                   DeviceBuffer::Create(device_, dst.nbytes(), 64));
  dst.data = buffer.data();
  const ExecutionContext ctx{device_, KernelChoice::kOptimized};
  if (src.dtype == DType::kF16 && dtype == DType::kBF16) {
    // No direct F16 -> BF16 conversion: widen to F32 first.
    TensorView wide = src;
    wide.dtype = DType::kF32;
    ASSIGN_OR_RETURN(DeviceBuffer tmp,
                     DeviceBuffer::Create(device_, wide.nbytes(), 64));
    wide.data = tmp.data();
    RETURN_IF_ERROR(Convert(ctx, src, wide));
    RETURN_IF_ERROR(Convert(ctx, wide, dst));
  } else {
    RETURN_IF_ERROR(Convert(ctx, src, dst));
  }
  out_->bytes_allocated += static_cast<int64_t>(buffer.size());
  out_->buffers.push_back(std::move(buffer));
  return dst;
}

absl::StatusOr<TensorView> WeightLoader::LinearWeight(
    absl::string_view full_name, int64_t out, int64_t in) {
  ASSIGN_OR_RETURN(TensorView w, UnpackedLinearWeight(full_name, out, in));
  const SafetensorsTensorInfo* info = store_->Info(full_name);
  if (!int8_panels_ || !IsBlockQuantized(w.dtype) || info == nullptr || info->data != w.data) {
    return WithPacked(w);
  }
  // The copy outlives this loader's device (a replica's private one, gone
  // with it while the store serves the others): made on the process-wide
  // instance of the same device kind.
  absl::StatusOr<Device*> shared_device = DeviceRegistry::Get(device_->name());
  if (!shared_device.ok()) return WithPacked(w);
  // Used in place: the copy is shared through the store, and the stored
  // bytes released once it exists (consumers that come later find the copy
  // and never read them; releasing again is a no-op that counts the bytes).
  constexpr uint32_t kInt8PanelsTag = 0x38746e69;  // "int8"
  int64_t made_bytes = 0;
  ASSIGN_OR_RETURN(
      WeightStore::Packed shared,
      store_->FindOrPack(w.data, kInt8PanelsTag,
                         [&]() -> absl::StatusOr<WeightStore::Packed> {
                           ExecutionContext ctx{*shared_device, KernelChoice::kOptimized};
                           ctx.activations = ActivationPrecision::kInt8;
                           ASSIGN_OR_RETURN(DeviceBuffer packed, PackLinearWeight(ctx, w));
                           if (packed.size() == 0) return WeightStore::Packed();
                           made_bytes = static_cast<int64_t>(packed.size());
                           auto owner = std::make_shared<DeviceBuffer>(std::move(packed));
                           return WeightStore::Packed{owner->data(), owner};
                         }));
  if (shared.data == nullptr) return w;  // no such layout on this device
  out_->bytes_allocated += made_bytes;
  // Released (or never resident): not mapped weight memory any more.
  out_->bytes_mapped -= static_cast<int64_t>(store_->ReleaseStored(w.data, w.nbytes()));
  out_->shared.push_back(shared.owner);
  w.packed = shared.data;
  return w;
}

absl::StatusOr<absl::optional<TensorView>> WeightLoader::FusedLinearWeight(
    const std::vector<std::string>& names, const std::vector<int64_t>& outs,
    int64_t in) {
  if (names.empty() || names.size() != outs.size()) {
    return absl::InvalidArgumentError("FusedLinearWeight: names and outs differ");
  }
  std::vector<TensorView> parts;
  int64_t total = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    ASSIGN_OR_RETURN(TensorView p, UnpackedLinearWeight(names[i], outs[i], in));
    if (!parts.empty() && p.dtype != parts[0].dtype) return absl::nullopt;
    parts.push_back(p);
    total += outs[i];
  }
  const DType dtype = parts[0].dtype;
  const size_t row_bytes = DTypeRowBytes(dtype, in);
  ASSIGN_OR_RETURN(DeviceBuffer buffer,
                   DeviceBuffer::Create(device_, total * row_bytes, 64));
  uint8_t* dst = buffer.as<uint8_t>();
  for (const TensorView& p : parts) {
    std::memcpy(dst, p.data, p.nbytes());
    dst += p.nbytes();
  }
  TensorView fused = TensorView::Contiguous(buffer.data(), dtype, {total, in});
  out_->bytes_allocated += static_cast<int64_t>(buffer.size());
  out_->buffers.push_back(std::move(buffer));
  ASSIGN_OR_RETURN(TensorView packed, WithPacked(fused));
  return absl::optional<TensorView>(packed);
}

absl::StatusOr<TensorView> WeightLoader::FusedF32(
    const std::vector<std::string>& names, const std::vector<int64_t>& outs) {
  int64_t total = 0;
  for (int64_t o : outs) total += o;
  ASSIGN_OR_RETURN(DeviceBuffer buffer,
                   DeviceBuffer::Create(device_, total * sizeof(float), 64));
  float* dst = buffer.as<float>();
  for (size_t i = 0; i < names.size(); ++i) {
    ASSIGN_OR_RETURN(TensorView p, F32(names[i], {outs[i]}));
    std::memcpy(dst, p.data, outs[i] * sizeof(float));
    dst += outs[i];
  }
  TensorView fused =
      TensorView::Contiguous(buffer.data(), DType::kF32, {total});
  out_->bytes_allocated += static_cast<int64_t>(buffer.size());
  out_->buffers.push_back(std::move(buffer));
  return fused;
}

absl::StatusOr<TensorView> WeightLoader::WithPacked(TensorView w) {
  const bool int8 = int8_panels_ && IsBlockQuantized(w.dtype);
  if (pack_budget_ <= 0 && !int8) return w;
  ExecutionContext ctx{device_, KernelChoice::kOptimized};
  if (int8) ctx.activations = ActivationPrecision::kInt8;
  ASSIGN_OR_RETURN(DeviceBuffer packed, PackLinearWeight(ctx, w));
  if (packed.size() == 0) return w;
  if (!int8) {
    if (static_cast<int64_t>(packed.size()) > pack_budget_) return w;
    pack_budget_ -= static_cast<int64_t>(packed.size());
  }
  w.packed = packed.data();
  out_->bytes_allocated += static_cast<int64_t>(packed.size());
  out_->buffers.push_back(std::move(packed));
  return w;
}

absl::StatusOr<TensorView> WeightLoader::UnpackedLinearWeight(
    absl::string_view full_name, int64_t out, int64_t in) {
  ASSIGN_OR_RETURN(TensorView src, Stored(full_name, {out, in}));
  if (KeepAsStored(src)) return InPlace(src);
  if (IsBlockQuantized(linear_dtype_)) {
    return Quantized(full_name, src, linear_dtype_);
  }
  // dtype=int8: Q8_0, whose scale per block of 32 inputs keeps a row's
  // outlier weights from coarsening the rest (per-row scales lose 5x more
  // cosine on MiniLM); Linear runs it in int8 x int8 at prefill sizes.
  if (linear_dtype_ == DType::kI8) return Quantized(full_name, src, DType::kQ8_0);
  return As(full_name, src, linear_dtype_);
}

absl::StatusOr<TensorView> WeightLoader::F32(
    absl::string_view full_name, std::initializer_list<int64_t> shape) {
  ASSIGN_OR_RETURN(TensorView src, Stored(full_name, shape));
  if (IsBlockQuantized(src.dtype)) return Dequantized(full_name, src);
  return As(full_name, src, DType::kF32);
}

absl::StatusOr<TensorView> WeightLoader::Table(absl::string_view full_name,
                                               int64_t rows, int64_t cols,
                                               absl::optional<DType> want) {
  ASSIGN_OR_RETURN(TensorView src, Stored(full_name, {rows, cols}));
  if (KeepAsStored(src)) return InPlace(src);
  if (want.has_value() && IsBlockQuantized(*want)) {
    // A tied table that doubles as a quantized LM head.
    return Quantized(full_name, src, *want);
  }
  DType dtype = src.dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  if (want.has_value()) dtype = *want;
  return As(full_name, src, dtype);
}

}  // namespace inferd
