// Reference ("native") kernels: plain loops, double accumulation where it is
// cheap, written to be obviously correct rather than fast. They define the
// semantics the optimized kernels are tested against.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/bf16.h"
#include "device/internal/check.h"
#include "device/internal/paged.h"
#include "device/op_list.h"
#include "device/op_table.h"
#include "device/quant.h"

namespace inferd {
namespace ref {
namespace {

// ref::<Kernel> for every op of INFERD_OPS (device/op_list.h), defined below.
INFERD_OPS(INFERD_DECLARE_KERNEL)

using device_internal::IsEmpty;
using device_internal::Row;

float Load(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kBF16: return Bf16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DType::kF16: return F16ToFloat(static_cast<const uint16_t*>(base)[i]);
    default: return 0.0f;
  }
}

void Store(void* base, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(base)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(base)[i] = FloatToBf16(v); break;
    case DType::kF16: static_cast<uint16_t*>(base)[i] = FloatToF16(v); break;
    default: break;
  }
}

// Weights of any dtype Linear accepts: each row decoded to F32 first
// (device/quant.h), then dotted in double.
absl::Status Linear(const KernelContext&, const TensorView& x,
                    const TensorView& w, const TensorView& bias,
                    const TensorView& y) {
  const int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  const size_t row_bytes = DTypeRowBytes(w.dtype, k);
  std::vector<float> wrow(k);
  for (int64_t j = 0; j < n; ++j) {
    INFERD_DEVICE_RETURN_IF_ERROR(DequantizeRow(
        w.dtype, static_cast<const uint8_t*>(w.data) + j * row_bytes, k,
        wrow.data()));
    for (int64_t i = 0; i < m; ++i) {
      const float* xr = Row<const float>(x, i);
      double acc = IsEmpty(bias) ? 0.0 : bias.as<const float>()[j];
      for (int64_t p = 0; p < k; ++p) {
        acc += static_cast<double>(xr[p]) * wrow[p];
      }
      Row<float>(y, i)[j] = static_cast<float>(acc);
    }
  }
  return absl::OkStatus();
}

absl::Status MatMul(const KernelContext&, const TensorView& a,
                    const TensorView& b, bool transpose_b,
                    const TensorView& c) {
  const int64_t m = a.shape[0], k = a.shape[1], n = c.shape[1];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const float bv =
            transpose_b ? Row<const float>(b, j)[p] : Row<const float>(b, p)[j];
        acc += static_cast<double>(Row<const float>(a, i)[p]) * bv;
      }
      Row<float>(c, i)[j] = static_cast<float>(acc);
    }
  }
  return absl::OkStatus();
}

absl::Status Embedding(const KernelContext&, const TensorView& table,
                       const TensorView& ids, const TensorView& out) {
  const int64_t vocab = table.shape[0], h = table.shape[1];
  const size_t row_bytes = DTypeRowBytes(table.dtype, h);
  for (int64_t t = 0; t < ids.shape[0]; ++t) {
    const int32_t id = ids.as<const int32_t>()[t];
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("Embedding: id ", id, " outside [0, ", vocab, ")"));
    }
    INFERD_DEVICE_RETURN_IF_ERROR(DequantizeRow(
        table.dtype, static_cast<const uint8_t*>(table.data) + id * row_bytes,
        h, Row<float>(out, t)));
  }
  return absl::OkStatus();
}

absl::Status MeanPool(const KernelContext&, const TensorView& x,
                      const TensorView& starts, const TensorView& ends,
                      const TensorView& out) {
  const int64_t rows = x.shape[0], h = x.shape[1];
  for (int64_t s = 0; s < starts.shape[0]; ++s) {
    const int32_t b = starts.as<const int32_t>()[s];
    const int32_t e = ends.as<const int32_t>()[s];
    if (b < 0 || b >= e || e > rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MeanPool: rows [", b, ", ", e, ") of sequence ", s,
          " are not a non-empty range within [0, ", rows, ")"));
    }
    for (int64_t j = 0; j < h; ++j) {
      double acc = 0.0;
      for (int32_t r = b; r < e; ++r) acc += Row<const float>(x, r)[j];
      Row<float>(out, s)[j] = static_cast<float>(acc * (1.0 / (e - b)));
    }
  }
  return absl::OkStatus();
}

absl::Status L2Normalize(const KernelContext&, const TensorView& x,
                         const TensorView& out) {
  for (int64_t r = 0; r < x.shape[0]; ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < x.shape[1]; ++j) {
      const double v = Row<const float>(x, r)[j];
      sum += v * v;
    }
    const double scale = 1.0 / std::max(std::sqrt(sum), 1e-12);
    for (int64_t j = 0; j < x.shape[1]; ++j) {
      Row<float>(out, r)[j] =
          static_cast<float>(double{Row<const float>(x, r)[j]} * scale);
    }
  }
  return absl::OkStatus();
}

absl::Status Scores(const KernelContext&, ScoreMode mode, const TensorView& x,
                    const TensorView& out) {
  const int64_t n = x.shape[1];
  for (int64_t r = 0; r < x.shape[0]; ++r) {
    if (mode == ScoreMode::kSigmoid) {
      for (int64_t j = 0; j < n; ++j) {
        Row<float>(out, r)[j] = static_cast<float>(
            1.0 / (1.0 + std::exp(-double{Row<const float>(x, r)[j]})));
      }
      continue;
    }
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      mx = std::max<double>(mx, Row<const float>(x, r)[j]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(Row<const float>(x, r)[j] - mx);
    for (int64_t j = 0; j < n; ++j) {
      Row<float>(out, r)[j] =
          static_cast<float>(std::exp(Row<const float>(x, r)[j] - mx) / sum);
    }
  }
  return absl::OkStatus();
}

absl::Status Convert(const KernelContext&, const TensorView& src,
                     const TensorView& dst) {
  for (int64_t r = 0; r < src.shape[0]; ++r) {
    for (int64_t j = 0; j < src.shape[1]; ++j) {
      Store(dst.data, dst.dtype, r * dst.strides[0] + j,
            Load(src.data, src.dtype, r * src.strides[0] + j));
    }
  }
  return absl::OkStatus();
}

absl::Status Add(const KernelContext&, const TensorView& a, const TensorView& b,
                 const TensorView& out) {
  for (int64_t r = 0; r < a.shape[0]; ++r) {
    for (int64_t j = 0; j < a.shape[1]; ++j) {
      Row<float>(out, r)[j] = Row<const float>(a, r)[j] + Row<const float>(b, r)[j];
    }
  }
  return absl::OkStatus();
}

double ApplyActivation(Activation act, double x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  switch (act) {
    case Activation::kSilu: return x / (1.0 + std::exp(-x));
    case Activation::kGeluErf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
    case Activation::kRelu: return x > 0 ? x : 0.0;
    case Activation::kTanh: return std::tanh(x);
  }
  return x;
}

absl::Status Activate(const KernelContext&, Activation act, const TensorView& x,
                      const TensorView& out) {
  for (int64_t r = 0; r < x.shape[0]; ++r) {
    for (int64_t j = 0; j < x.shape[1]; ++j) {
      Row<float>(out, r)[j] =
          static_cast<float>(ApplyActivation(act, Row<const float>(x, r)[j]));
    }
  }
  return absl::OkStatus();
}

absl::Status GatedActivate(const KernelContext&, Activation act,
                           const TensorView& gate, const TensorView& up,
                           const TensorView& out) {
  for (int64_t r = 0; r < gate.shape[0]; ++r) {
    for (int64_t j = 0; j < gate.shape[1]; ++j) {
      Row<float>(out, r)[j] = static_cast<float>(
          ApplyActivation(act, Row<const float>(gate, r)[j]) *
          Row<const float>(up, r)[j]);
    }
  }
  return absl::OkStatus();
}

absl::Status Softmax(const KernelContext&, const TensorView& x,
                     const TensorView& out) {
  const int64_t h = x.shape[1];
  std::vector<double> e(h);
  for (int64_t r = 0; r < x.shape[0]; ++r) {
    const float* xr = Row<const float>(x, r);
    double mx = -INFINITY;
    for (int64_t j = 0; j < h; ++j) mx = std::max<double>(mx, xr[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < h; ++j) {
      e[j] = std::exp(xr[j] - mx);
      sum += e[j];
    }
    for (int64_t j = 0; j < h; ++j) Row<float>(out, r)[j] = static_cast<float>(e[j] / sum);
  }
  return absl::OkStatus();
}

// Adds the residual (if any) into `v` and writes it back to the residual.
void LoadRowWithResidual(const TensorView& x, const TensorView& residual,
                         int64_t r, std::vector<double>* v) {
  const int64_t h = x.shape[1];
  for (int64_t j = 0; j < h; ++j) {
    double s = Row<const float>(x, r)[j];
    if (!IsEmpty(residual)) {
      const float sum = static_cast<float>(s + Row<const float>(residual, r)[j]);
      Row<float>(residual, r)[j] = sum;
      s = sum;
    }
    (*v)[j] = s;
  }
}

absl::Status LayerNorm(const KernelContext&, const TensorView& x,
                       const TensorView& residual, const TensorView& weight,
                       const TensorView& bias, float eps,
                       const TensorView& out) {
  const int64_t h = x.shape[1];
  std::vector<double> v(h);
  for (int64_t r = 0; r < x.shape[0]; ++r) {
    LoadRowWithResidual(x, residual, r, &v);
    double mean = 0.0;
    for (double e : v) mean += e;
    mean /= h;
    double var = 0.0;
    for (double e : v) var += (e - mean) * (e - mean);
    var /= h;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < h; ++j) {
      double o = (v[j] - mean) * inv * weight.as<const float>()[j];
      if (!IsEmpty(bias)) o += bias.as<const float>()[j];
      Row<float>(out, r)[j] = static_cast<float>(o);
    }
  }
  return absl::OkStatus();
}

absl::Status RmsNorm(const KernelContext&, const TensorView& x,
                     const TensorView& residual, const TensorView& weight,
                     float eps, const TensorView& out) {
  const int64_t h = x.shape[1];
  std::vector<double> v(h);
  for (int64_t r = 0; r < x.shape[0]; ++r) {
    LoadRowWithResidual(x, residual, r, &v);
    double ss = 0.0;
    for (double e : v) ss += e * e;
    const double inv = 1.0 / std::sqrt(ss / h + eps);
    for (int64_t j = 0; j < h; ++j) {
      Row<float>(out, r)[j] =
          static_cast<float>(v[j] * inv * weight.as<const float>()[j]);
    }
  }
  return absl::OkStatus();
}

void RotateHeads(const TensorView& t, const TensorView& cos_sin, int head_dim,
                 RopeStyle style) {
  const int64_t rot = cos_sin.shape[1];
  const int64_t half = rot / 2;
  const int64_t heads = t.shape[1] / head_dim;
  for (int64_t r = 0; r < t.shape[0]; ++r) {
    const float* c = Row<const float>(cos_sin, r);
    const float* s = c + half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = Row<float>(t, r) + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        // Pair (a, b) rotates by angle i: (a cos - b sin, b cos + a sin).
        const int64_t ia = style == RopeStyle::kNeox ? i : 2 * i;
        const int64_t ib = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
        const double a = v[ia], b = v[ib];
        v[ia] = static_cast<float>(a * c[i] - b * s[i]);
        v[ib] = static_cast<float>(b * c[i] + a * s[i]);
      }
    }
  }
}

absl::Status ApplyRotary(const KernelContext&, const TensorView& q,
                         const TensorView& k, const TensorView& cos_sin,
                         int head_dim, RopeStyle style) {
  RotateHeads(q, cos_sin, head_dim, style);
  if (!IsEmpty(k)) RotateHeads(k, cos_sin, head_dim, style);
  return absl::OkStatus();
}

// Key/value row for one (key position, kv head), for either cache layout.
struct KvSource {
  // Contiguous per-seq rows (varlen) ...
  const TensorView* k = nullptr;
  const TensorView* v = nullptr;
  int64_t row0 = 0;
  // ... or paged.
  const TensorView* k_cache = nullptr;
  const TensorView* v_cache = nullptr;
  const int32_t* block_table = nullptr;

  void Get(int64_t pos, int kvh, int d, std::vector<double>* kk,
           std::vector<double>* vv) const {
    if (k != nullptr) {
      for (int i = 0; i < d; ++i) {
        (*kk)[i] = Row<const float>(*k, row0 + pos)[kvh * d + i];
        (*vv)[i] = Row<const float>(*v, row0 + pos)[kvh * d + i];
      }
      return;
    }
    const int64_t bs = k_cache->shape[1], hk = k_cache->shape[2];
    const int64_t slot = int64_t{block_table[pos / bs]} * bs + pos % bs;
    const int64_t base = (slot * hk + kvh) * d;
    for (int i = 0; i < d; ++i) {
      (*kk)[i] = Load(k_cache->data, k_cache->dtype, base + i);
      (*vv)[i] = Load(v_cache->data, v_cache->dtype, base + i);
    }
  }
};

// Two-pass softmax attention of q_len queries (positions first_pos + i, rows
// q_row0 + i) over keys at positions [0, kv_len).
void AttendSequence(const TensorView& q, int64_t q_row0, int64_t q_len,
                    int64_t first_pos, int64_t kv_len, const KvSource& kv,
                    const AttentionParams& p, const TensorView& out) {
  const int d = p.head_dim;
  const int group = p.num_heads / p.num_kv_heads;
  std::vector<double> kk(d), vv(d), scores(kv_len), acc(d);
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t pos = first_pos + i;
    for (int h = 0; h < p.num_heads; ++h) {
      const int kvh = h / group;
      const float* qr = Row<const float>(q, q_row0 + i) + h * d;
      double mx = -INFINITY;
      for (int64_t j = 0; j < kv_len; ++j) {
        const bool visible =
            (!p.causal || j <= pos) &&
            (p.sliding_window == 0 || j > pos - p.sliding_window) &&
            (p.causal || p.sliding_window == 0 || j < pos + p.sliding_window);
        if (!visible) {
          scores[j] = -INFINITY;
          continue;
        }
        kv.Get(j, kvh, d, &kk, &vv);
        double s = 0.0;
        for (int e = 0; e < d; ++e) s += qr[e] * kk[e];
        s *= p.scale;
        if (p.logits_soft_cap > 0) {
          s = p.logits_soft_cap * std::tanh(s / p.logits_soft_cap);
        }
        if (p.relative_bias != nullptr) {
          const int64_t r = p.relative_bias_radius;
          const int64_t rel = std::min(std::max(j - pos, -r), r);
          s += p.relative_bias[h * (2 * r + 1) + rel + r];
        }
        scores[j] = s;
        mx = std::max(mx, s);
      }
      double sum = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < kv_len; ++j) {
        if (scores[j] == -INFINITY) continue;
        const double w = std::exp(scores[j] - mx);
        sum += w;
        kv.Get(j, kvh, d, &kk, &vv);
        for (int e = 0; e < d; ++e) acc[e] += w * vv[e];
      }
      float* o = Row<float>(out, q_row0 + i) + h * d;
      for (int e = 0; e < d; ++e) o[e] = static_cast<float>(acc[e] / sum);
    }
  }
}

absl::Status VarlenAttention(const KernelContext&, const TensorView& q,
                             const TensorView& k, const TensorView& v,
                             const TensorView& cu_seqlens,
                             const AttentionParams& p, const TensorView& out) {
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  const int64_t num_seqs = cu_seqlens.shape[0] - 1;
  if (cu[0] != 0 || cu[num_seqs] != q.shape[0]) {
    return absl::InvalidArgumentError(
        "VarlenAttention: cu_seqlens must start at 0 and end at total_tokens");
  }
  for (int64_t s = 0; s < num_seqs; ++s) {
    if (cu[s + 1] < cu[s]) {
      return absl::InvalidArgumentError(
          "VarlenAttention: cu_seqlens must be non-decreasing");
    }
  }
  for (int64_t s = 0; s < num_seqs; ++s) {
    KvSource src;
    src.k = &k;
    src.v = &v;
    src.row0 = cu[s];
    const int64_t len = cu[s + 1] - cu[s];
    AttendSequence(q, cu[s], len, 0, len, src, p, out);
  }
  return absl::OkStatus();
}

absl::Status ReshapeAndCache(const KernelContext&, const TensorView& k,
                             const TensorView& v,
                             const TensorView& slot_mapping,
                             const TensorView& k_cache,
                             const TensorView& v_cache) {
  const int64_t num_slots = k_cache.shape[0] * k_cache.shape[1];
  const int64_t width = k.shape[1];
  for (int64_t t = 0; t < k.shape[0]; ++t) {
    const int64_t slot = slot_mapping.as<const int32_t>()[t];
    if (slot < 0) continue;
    if (slot >= num_slots) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReshapeAndCache: slot ", slot, " outside the cache (", num_slots,
          " slots)"));
    }
    for (int64_t j = 0; j < width; ++j) {
      Store(k_cache.data, k_cache.dtype, slot * width + j, Row<const float>(k, t)[j]);
      Store(v_cache.data, v_cache.dtype, slot * width + j, Row<const float>(v, t)[j]);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ref

// Shared with the optimized kernels: validates paged metadata for seq `s`.
absl::Status ValidatePagedSequence(const TensorView& q,
                                   const TensorView& k_cache,
                                   const PagedAttentionMetadata& md,
                                   int64_t s) {
  const int32_t* qsl = md.query_start_loc.as<const int32_t>();
  const int64_t num_seqs = md.query_start_loc.shape[0] - 1;
  const int64_t q_begin = qsl[s], q_end = qsl[s + 1];
  const int64_t seq_len = md.seq_lens.as<const int32_t>()[s];
  const int64_t max_blocks = md.block_tables.shape[1];
  const int64_t bs = k_cache.shape[1], num_blocks = k_cache.shape[0];
  if (q_begin < 0 || q_end < q_begin || q_end > q.shape[0] ||
      (s == 0 && q_begin != 0) || (s == num_seqs - 1 && q_end != q.shape[0])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PagedAttention: bad query_start_loc for seq ", s));
  }
  if (seq_len < q_end - q_begin || seq_len > max_blocks * bs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PagedAttention: seq ", s, " has seq_len ", seq_len, " for ",
        q_end - q_begin, " new tokens and ", max_blocks, " blocks of ", bs));
  }
  const int32_t* bt = md.block_tables.as<const int32_t>() + s * max_blocks;
  for (int64_t b = 0; b < (seq_len + bs - 1) / bs; ++b) {
    if (bt[b] < 0 || bt[b] >= num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PagedAttention: seq ", s, " block ", b, " = ", bt[b],
          " outside [0, ", num_blocks, ")"));
    }
  }
  return absl::OkStatus();
}

namespace ref {
namespace {

absl::Status PagedAttention(const KernelContext&, const TensorView& q,
                            const TensorView& k_cache,
                            const TensorView& v_cache,
                            const PagedAttentionMetadata& md,
                            const AttentionParams& p, const TensorView& out) {
  const int64_t num_seqs = md.query_start_loc.shape[0] - 1;
  for (int64_t s = 0; s < num_seqs; ++s) {
    INFERD_DEVICE_RETURN_IF_ERROR(ValidatePagedSequence(q, k_cache, md, s));
  }
  const int32_t* qsl = md.query_start_loc.as<const int32_t>();
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t q_len = qsl[s + 1] - qsl[s];
    const int64_t seq_len = md.seq_lens.as<const int32_t>()[s];
    KvSource src;
    src.k_cache = &k_cache;
    src.v_cache = &v_cache;
    src.block_table =
        md.block_tables.as<const int32_t>() + s * md.block_tables.shape[1];
    AttendSequence(q, qsl[s], q_len, seq_len - q_len, seq_len, src, p, out);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ref

// Every op of INFERD_OPS; none of INFERD_OPTIONAL_OPS (plain loops have no
// packed layout).
const OpTable& ReferenceOpTable() {
  static const OpTable table = [] {
    OpTable t;
#define INFERD_REF_KERNEL(member, Kernel, Return, params) \
  t.member = &ref::Kernel;
    INFERD_OPS(INFERD_REF_KERNEL)
#undef INFERD_REF_KERNEL
    return t;
  }();
  return table;
}

}  // namespace inferd
