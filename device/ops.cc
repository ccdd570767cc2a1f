#include "device/ops.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "device/internal/check.h"
#include "device/op_table.h"

namespace inferd {
namespace {

using device_internal::CheckMatrix;
using device_internal::CheckShape2;
using device_internal::CheckVector;
using device_internal::IsEmpty;

// Resolves the device and the kernel `Fn` to call: the device's entry when
// optimized kernels are asked for and present, else the reference one.
template <typename Fn>
absl::Status Resolve(const ExecutionContext& ctx, Fn OpTable::*entry,
                     KernelContext* kctx, Fn* fn) {
  Device* device = ctx.device;
  if (device == nullptr) {
    absl::StatusOr<Device*> cpu = DeviceRegistry::Get("cpu");
    if (!cpu.ok()) return cpu.status();
    device = *cpu;
  }
  kctx->device = device;
  kctx->pool = nullptr;
  kctx->decode_rows = ctx.decode_rows;
  kctx->activations = ctx.activations;
  if (ctx.kernels == KernelChoice::kOptimized) {
    Fn f = device->ops().*entry;
    if (f != nullptr) {
      kctx->pool = device->thread_pool();
      *fn = f;
      return absl::OkStatus();
    }
  }
  if (!device->host_accessible()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "reference kernels need host memory; device ", device->name(),
        " has none for this op"));
  }
  *fn = ReferenceOpTable().*entry;
  return absl::OkStatus();
}

#define INFERD_DISPATCH(entry, ...)                                  \
  do {                                                               \
    KernelContext kctx;                                              \
    decltype(OpTable::entry) fn = nullptr;                           \
    INFERD_DEVICE_RETURN_IF_ERROR(Resolve(ctx, &OpTable::entry, &kctx, &fn)); \
    return fn(kctx, __VA_ARGS__);                                    \
  } while (0)

absl::Status CheckSameShape(absl::string_view name, const TensorView& t,
                            const TensorView& ref) {
  return CheckShape2(name, t, ref.shape[0], ref.shape[1]);
}

// Column slice [begin, begin + width) of a 2-D F32 view.
TensorView ColumnSlice(const TensorView& t, int64_t begin, int64_t width) {
  TensorView s = t;
  s.data = static_cast<float*>(t.data) + begin;
  s.shape[1] = width;
  if (s.shape[0] <= 1) s.strides[0] = t.strides[0];
  return s;
}

absl::Status CheckAttentionParams(const AttentionParams& p) {
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.head_dim <= 0 ||
      p.head_dim > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention: need num_heads, num_kv_heads > 0 and 0 < head_dim <= 256; "
        "got ", p.num_heads, ", ", p.num_kv_heads, ", ", p.head_dim));
  }
  if (p.num_heads % p.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention: num_heads ", p.num_heads,
                     " is not a multiple of num_kv_heads ", p.num_kv_heads));
  }
  if (p.sliding_window < 0) {
    return absl::InvalidArgumentError(
        "attention: sliding_window must be >= 0");
  }
  if (p.relative_bias_radius < 0 ||
      (p.relative_bias == nullptr && p.relative_bias_radius != 0)) {
    return absl::InvalidArgumentError(
        "attention: relative_bias_radius must be >= 0, and 0 without a "
        "relative_bias table");
  }
  if (p.scale < 0 || p.logits_soft_cap < 0) {
    return absl::InvalidArgumentError(
        "attention: scale and logits_soft_cap must be >= 0");
  }
  return absl::OkStatus();
}

AttentionParams ResolveScale(AttentionParams p) {
  if (p.scale == 0.0f) p.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  return p;
}

// A weight [rows, cols]: contiguous F32, BF16, F16 or block-quantized (cols
// a whole number of blocks).
absl::Status CheckWeightMatrix(absl::string_view op, absl::string_view name,
                               const TensorView& w) {
  const bool dtype_ok = w.dtype == DType::kF32 || w.dtype == DType::kBF16 ||
                        w.dtype == DType::kF16 || IsBlockQuantized(w.dtype);
  if (w.rank != 2 || !dtype_ok || !w.is_contiguous() || w.data == nullptr ||
      w.shape[0] < 0 || w.shape[1] < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", name, " must be a contiguous F32/BF16/F16/quantized 2-D "
        "tensor, got ", w.DebugString()));
  }
  const int64_t block = DTypeBlockElements(w.dtype);
  if (w.shape[1] % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", name, " ", w.DebugString(), ": row length ", w.shape[1],
        " is not a multiple of the ", DTypeName(w.dtype), " block size ",
        block));
  }
  return absl::OkStatus();
}

absl::Status CheckRows(const TensorView& x, const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("x", x, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("out", out, DType::kF32));
  return CheckSameShape("out", out, x);
}

}  // namespace

absl::Status Linear(const ExecutionContext& ctx, const TensorView& x,
                    const TensorView& w, const TensorView& bias,
                    const TensorView& y) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("x", x, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckWeightMatrix("Linear", "weight", w));
  const int64_t k = x.shape[1], n = w.shape[0];
  if (w.shape[1] != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Linear: x ", x.DebugString(), " does not match weight ",
        w.DebugString()));
  }
  if (!IsEmpty(bias)) {
    INFERD_DEVICE_RETURN_IF_ERROR(CheckVector("bias", bias, DType::kF32, n));
  }
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("y", y, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("y", y, x.shape[0], n));
  if (x.shape[0] == 0 || n == 0) return absl::OkStatus();
  INFERD_DISPATCH(linear, x, w, bias, y);
}

absl::StatusOr<DeviceBuffer> PackLinearWeight(const ExecutionContext& ctx,
                                              const TensorView& w) {
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckWeightMatrix("PackLinearWeight", "weight", w));
  if (ctx.kernels != KernelChoice::kOptimized || w.shape[0] == 0 ||
      w.shape[1] == 0 || !w.is_contiguous()) {
    return DeviceBuffer();
  }
  KernelContext kctx;
  decltype(OpTable::pack_linear) fn = nullptr;
  INFERD_DEVICE_RETURN_IF_ERROR(
      Resolve(ctx, &OpTable::pack_linear, &kctx, &fn));
  if (fn == nullptr) return DeviceBuffer();
  return fn(kctx, w);
}

absl::Status MatMul(const ExecutionContext& ctx, const TensorView& a,
                    const TensorView& b, bool transpose_b,
                    const TensorView& c) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("a", a, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("b", b, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("c", c, DType::kF32));
  const int64_t k = a.shape[1];
  const int64_t kb = transpose_b ? b.shape[1] : b.shape[0];
  const int64_t n = transpose_b ? b.shape[0] : b.shape[1];
  if (kb != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatMul: inner dims differ: ", a.DebugString(), " x ",
                     b.DebugString(), transpose_b ? "^T" : ""));
  }
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("c", c, a.shape[0], n));
  if (a.shape[0] == 0 || n == 0) return absl::OkStatus();
  INFERD_DISPATCH(matmul, a, b, transpose_b, c);
}

absl::Status Embedding(const ExecutionContext& ctx, const TensorView& table,
                       const TensorView& ids, const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckWeightMatrix("Embedding", "table", table));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckVector("ids", ids, DType::kI32, -1));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("out", out, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckShape2("out", out, ids.shape[0], table.shape[1]));
  if (ids.shape[0] == 0) return absl::OkStatus();
  INFERD_DISPATCH(embedding, table, ids, out);
}

absl::Status MeanPool(const ExecutionContext& ctx, const TensorView& x,
                      const TensorView& starts, const TensorView& ends,
                      const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("x", x, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckVector("starts", starts, DType::kI32, -1));
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckVector("ends", ends, DType::kI32, starts.shape[0]));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("out", out, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckShape2("out", out, starts.shape[0], x.shape[1]));
  if (starts.shape[0] == 0) return absl::OkStatus();
  INFERD_DISPATCH(mean_pool, x, starts, ends, out);
}

absl::Status L2Normalize(const ExecutionContext& ctx, const TensorView& x,
                         const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckRows(x, out));
  if (x.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(l2_normalize, x, out);
}

absl::Status Scores(const ExecutionContext& ctx, ScoreMode mode,
                    const TensorView& x, const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckRows(x, out));
  if (mode != ScoreMode::kSoftmax && mode != ScoreMode::kSigmoid) {
    return absl::InvalidArgumentError("Scores: unknown mode");
  }
  if (x.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(scores, mode, x, out);
}

absl::Status Convert(const ExecutionContext& ctx, const TensorView& src,
                     const TensorView& dst) {
  auto ok_dtype = [](DType d) {
    return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16;
  };
  if (!ok_dtype(src.dtype) || !ok_dtype(dst.dtype) || src.rank != dst.rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Convert: unsupported ", src.DebugString(), " -> ",
                     dst.DebugString()));
  }
  for (int i = 0; i < src.rank; ++i) {
    if (src.shape[i] != dst.shape[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Convert: shapes differ: ", src.DebugString(), " vs ",
          dst.DebugString()));
    }
  }
  // Reduce to 2-D views with contiguous rows.
  auto as_2d = [](const TensorView& t, TensorView* out) -> absl::Status {
    if (t.rank == 2 && (t.shape[1] <= 1 || t.strides[1] == 1) &&
        (t.shape[0] <= 1 || t.strides[0] >= t.shape[1])) {
      *out = t;
      if (out->shape[0] <= 1) out->strides[0] = out->shape[1];
      return absl::OkStatus();
    }
    if (!t.is_contiguous()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Convert: need contiguous or 2-D row-strided, got ",
          t.DebugString()));
    }
    *out = TensorView::Contiguous(t.data, t.dtype, {1, t.numel()});
    return absl::OkStatus();
  };
  TensorView s, d;
  INFERD_DEVICE_RETURN_IF_ERROR(as_2d(src, &s));
  INFERD_DEVICE_RETURN_IF_ERROR(as_2d(dst, &d));
  if (s.shape[0] != d.shape[0] || s.shape[1] != d.shape[1]) {
    s = TensorView::Contiguous(src.data, src.dtype, {1, src.numel()});
    d = TensorView::Contiguous(dst.data, dst.dtype, {1, dst.numel()});
    if (!src.is_contiguous() || !dst.is_contiguous()) {
      return absl::InvalidArgumentError("Convert: incompatible layouts");
    }
  }
  if (s.numel() == 0) return absl::OkStatus();
  if (s.data == nullptr || d.data == nullptr) {
    return absl::InvalidArgumentError("Convert: null data");
  }
  INFERD_DISPATCH(convert, s, d);
}

absl::Status Add(const ExecutionContext& ctx, const TensorView& a,
                 const TensorView& b, const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckRows(a, out));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("b", b, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckSameShape("b", b, a));
  if (a.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(add, a, b, out);
}

absl::Status Activate(const ExecutionContext& ctx, Activation act,
                      const TensorView& x, const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckRows(x, out));
  if (x.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(activate, act, x, out);
}

absl::Status GatedActivate(const ExecutionContext& ctx, Activation act,
                           const TensorView& gate_up, const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("gate_up", gate_up, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("out", out, DType::kF32));
  if (gate_up.shape[1] % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GatedActivate: gate_up width must be even, got ",
        gate_up.DebugString()));
  }
  const int64_t inter = gate_up.shape[1] / 2;
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckShape2("out", out, gate_up.shape[0], inter));
  if (out.numel() == 0) return absl::OkStatus();
  const TensorView gate = ColumnSlice(gate_up, 0, inter);
  const TensorView up = ColumnSlice(gate_up, inter, inter);
  INFERD_DISPATCH(gated_activate, act, gate, up, out);
}

absl::Status GatedActivate(const ExecutionContext& ctx, Activation act,
                           const TensorView& gate, const TensorView& up,
                           const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckRows(gate, out));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("up", up, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckSameShape("up", up, gate));
  if (out.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(gated_activate, act, gate, up, out);
}

absl::Status Gelu(const ExecutionContext& ctx, const TensorView& x,
                  const TensorView& out, bool tanh_approximation) {
  return Activate(ctx,
                  tanh_approximation ? Activation::kGeluTanh
                                     : Activation::kGeluErf,
                  x, out);
}

absl::Status Silu(const ExecutionContext& ctx, const TensorView& x,
                  const TensorView& out) {
  return Activate(ctx, Activation::kSilu, x, out);
}

absl::Status SwiGlu(const ExecutionContext& ctx, const TensorView& gate_up,
                    const TensorView& out) {
  return GatedActivate(ctx, Activation::kSilu, gate_up, out);
}

absl::Status SwiGlu(const ExecutionContext& ctx, const TensorView& gate,
                    const TensorView& up, const TensorView& out) {
  return GatedActivate(ctx, Activation::kSilu, gate, up, out);
}

absl::Status Softmax(const ExecutionContext& ctx, const TensorView& x,
                     const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckRows(x, out));
  if (x.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(softmax, x, out);
}

namespace {

absl::Status CheckNormArgs(const TensorView& x, const TensorView& residual,
                           const TensorView& weight, const TensorView& bias,
                           float eps, const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckRows(x, out));
  if (!IsEmpty(residual)) {
    INFERD_DEVICE_RETURN_IF_ERROR(
        CheckMatrix("residual", residual, DType::kF32));
    INFERD_DEVICE_RETURN_IF_ERROR(CheckSameShape("residual", residual, x));
  }
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckVector("weight", weight, DType::kF32, x.shape[1]));
  if (!IsEmpty(bias)) {
    INFERD_DEVICE_RETURN_IF_ERROR(
        CheckVector("bias", bias, DType::kF32, x.shape[1]));
  }
  if (!(eps >= 0.0f)) {
    return absl::InvalidArgumentError("norm: eps must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LayerNorm(const ExecutionContext& ctx, const TensorView& x,
                       const TensorView& weight, const TensorView& bias,
                       float eps, const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckNormArgs(x, TensorView{}, weight, bias, eps, out));
  if (x.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(layer_norm, x, TensorView{}, weight, bias, eps, out);
}

absl::Status RmsNorm(const ExecutionContext& ctx, const TensorView& x,
                     const TensorView& weight, float eps,
                     const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckNormArgs(x, TensorView{}, weight, TensorView{}, eps, out));
  if (x.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(rms_norm, x, TensorView{}, weight, eps, out);
}

absl::Status AddLayerNorm(const ExecutionContext& ctx, const TensorView& x,
                          const TensorView& residual, const TensorView& weight,
                          const TensorView& bias, float eps,
                          const TensorView& out) {
  if (IsEmpty(residual)) {
    return absl::InvalidArgumentError("AddLayerNorm: residual is required");
  }
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckNormArgs(x, residual, weight, bias, eps, out));
  if (x.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(layer_norm, x, residual, weight, bias, eps, out);
}

absl::Status AddRmsNorm(const ExecutionContext& ctx, const TensorView& x,
                        const TensorView& residual, const TensorView& weight,
                        float eps, const TensorView& out) {
  if (IsEmpty(residual)) {
    return absl::InvalidArgumentError("AddRmsNorm: residual is required");
  }
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckNormArgs(x, residual, weight, TensorView{}, eps, out));
  if (x.numel() == 0) return absl::OkStatus();
  INFERD_DISPATCH(rms_norm, x, residual, weight, eps, out);
}

absl::Status ApplyRotary(const ExecutionContext& ctx, const TensorView& q,
                         const TensorView& k, const TensorView& cos_sin,
                         int head_dim, RopeStyle style) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("q", q, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("cos_sin", cos_sin, DType::kF32));
  const int64_t rot = cos_sin.shape[1];
  if (head_dim <= 0 || rot <= 0 || rot % 2 != 0 || rot > head_dim ||
      q.shape[1] % head_dim != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ApplyRotary: bad head_dim ", head_dim, " / rotary dim ", rot,
        " for q ", q.DebugString()));
  }
  if (cos_sin.shape[0] != q.shape[0]) {
    return absl::InvalidArgumentError("ApplyRotary: cos_sin rows != tokens");
  }
  if (!IsEmpty(k)) {
    INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("k", k, DType::kF32));
    if (k.shape[0] != q.shape[0] || k.shape[1] % head_dim != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ApplyRotary: bad k ", k.DebugString()));
    }
  }
  if (q.shape[0] == 0) return absl::OkStatus();
  INFERD_DISPATCH(apply_rotary, q, k, cos_sin, head_dim, style);
}

absl::Status ApplyRope(const ExecutionContext& ctx, const RopeCache& rope,
                       const TensorView& positions, const TensorView& q,
                       const TensorView& k) {
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckVector("positions", positions, DType::kI32, -1));
  std::vector<float> cos_sin;
  INFERD_DEVICE_RETURN_IF_ERROR(rope.ComputeCosSin(
      absl::MakeConstSpan(positions.as<const int32_t>(), positions.shape[0]),
      &cos_sin));
  const TensorView cs = TensorView::Contiguous(
      cos_sin.data(), DType::kF32, {positions.shape[0], rope.rotary_dim()});
  return ApplyRotary(ctx, q, k, cs, rope.config().head_dim,
                     rope.config().style);
}

absl::Status VarlenAttention(const ExecutionContext& ctx, const TensorView& q,
                             const TensorView& k, const TensorView& v,
                             const TensorView& cu_seqlens,
                             const AttentionParams& params,
                             const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckAttentionParams(params));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("q", q, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("k", k, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("v", v, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("out", out, DType::kF32));
  const int64_t t = q.shape[0];
  const int64_t qw = int64_t{params.num_heads} * params.head_dim;
  const int64_t kw = int64_t{params.num_kv_heads} * params.head_dim;
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("q", q, t, qw));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("k", k, t, kw));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("v", v, t, kw));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("out", out, t, qw));
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckVector("cu_seqlens", cu_seqlens, DType::kI32, -1));
  if (cu_seqlens.shape[0] < 1) {
    return absl::InvalidArgumentError("VarlenAttention: empty cu_seqlens");
  }
  if (t == 0) return absl::OkStatus();
  INFERD_DISPATCH(varlen_attention, q, k, v, cu_seqlens, ResolveScale(params),
                  out);
}

namespace {

absl::Status CheckCache(absl::string_view name, const TensorView& c) {
  if (c.rank != 4 || !c.is_contiguous() || c.data == nullptr ||
      !(c.dtype == DType::kF32 || c.dtype == DType::kBF16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": expected contiguous F32/BF16 [num_blocks, block_size, "
        "num_kv_heads, head_dim], got ", c.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status CheckCaches(const TensorView& k_cache, const TensorView& v_cache) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckCache("k_cache", k_cache));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckCache("v_cache", v_cache));
  if (k_cache.dtype != v_cache.dtype || k_cache.shape != v_cache.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("k_cache ", k_cache.DebugString(), " and v_cache ",
                     v_cache.DebugString(), " differ"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReshapeAndCache(const ExecutionContext& ctx, const TensorView& k,
                             const TensorView& v,
                             const TensorView& slot_mapping,
                             const TensorView& k_cache,
                             const TensorView& v_cache) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckCaches(k_cache, v_cache));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("k", k, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("v", v, DType::kF32));
  const int64_t t = k.shape[0];
  const int64_t kw = k_cache.shape[2] * k_cache.shape[3];
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("k", k, t, kw));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("v", v, t, kw));
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckVector("slot_mapping", slot_mapping, DType::kI32, t));
  if (t == 0) return absl::OkStatus();
  INFERD_DISPATCH(reshape_and_cache, k, v, slot_mapping, k_cache, v_cache);
}

absl::Status PagedAttention(const ExecutionContext& ctx, const TensorView& q,
                            const TensorView& k_cache,
                            const TensorView& v_cache,
                            const PagedAttentionMetadata& metadata,
                            const AttentionParams& params,
                            const TensorView& out) {
  INFERD_DEVICE_RETURN_IF_ERROR(CheckAttentionParams(params));
  if (!params.causal) {
    return absl::InvalidArgumentError("PagedAttention: params.causal must be true");
  }
  if (params.relative_bias != nullptr) {
    return absl::InvalidArgumentError(
        "PagedAttention: relative_bias is for VarlenAttention only");
  }
  INFERD_DEVICE_RETURN_IF_ERROR(CheckCaches(k_cache, v_cache));
  if (k_cache.shape[2] != params.num_kv_heads ||
      k_cache.shape[3] != params.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PagedAttention: cache ", k_cache.DebugString(),
        " does not match num_kv_heads/head_dim"));
  }
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("q", q, DType::kF32));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckMatrix("out", out, DType::kF32));
  const int64_t qw = int64_t{params.num_heads} * params.head_dim;
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("q", q, q.shape[0], qw));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckShape2("out", out, q.shape[0], qw));
  INFERD_DEVICE_RETURN_IF_ERROR(CheckVector(
      "query_start_loc", metadata.query_start_loc, DType::kI32, -1));
  const int64_t num_seqs = metadata.query_start_loc.shape[0] - 1;
  if (num_seqs < 0) {
    return absl::InvalidArgumentError("PagedAttention: empty query_start_loc");
  }
  INFERD_DEVICE_RETURN_IF_ERROR(
      CheckVector("seq_lens", metadata.seq_lens, DType::kI32, num_seqs));
  const TensorView& bt = metadata.block_tables;
  if (num_seqs > 0 &&
      (bt.rank != 2 || bt.dtype != DType::kI32 || !bt.is_contiguous() ||
       bt.shape[0] != num_seqs || bt.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PagedAttention: block_tables must be contiguous I32 [num_seqs, "
        "max_blocks], got ", bt.DebugString()));
  }
  if (q.shape[0] == 0 || num_seqs == 0) return absl::OkStatus();
  INFERD_DISPATCH(paged_attention, q, k_cache, v_cache, metadata,
                  ResolveScale(params), out);
}

}  // namespace inferd
