// Attention on the CPU: varlen prefill, ReshapeAndCache and PagedAttention
// (vLLM's PagedAttention cache layout). Work items = (sequence, kv head,
// query tile), spread over the thread pool; each runs the tiled
// online-softmax kernel of attention_impl.h (AVX-512 build when available).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/bf16.h"
#include "device/cpu/attention.h"
#include "device/cpu/cpu_features.h"
#include "device/cpu/fast_math.h"
#include "device/cpu/kernels.h"
#include "device/internal/check.h"
#include "device/internal/paged.h"

namespace inferd {
namespace cpu_portable {
namespace {
#include "device/cpu/attention_impl.h"
}  // namespace
}  // namespace cpu_portable

namespace cpu {
namespace {

using device_internal::Row;

constexpr int64_t kQueryTile = 64;

float* Scratch(int64_t floats) {
  static thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < floats) buf.resize(floats);
  return buf.data();
}

struct WorkItem {
  int64_t job;
  int64_t q_begin, q_end;
};

// Runs all (job, query tile) items over the pool.
void RunJobs(ThreadPool* pool, const std::vector<AttnJob>& jobs) {
  std::vector<WorkItem> items;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (int64_t q = 0; q < jobs[j].q_len; q += kQueryTile) {
      items.push_back({static_cast<int64_t>(j), q,
                       std::min(jobs[j].q_len, q + kQueryTile)});
    }
  }
  // Longer key ranges first would balance better; items are roughly ordered
  // by sequence, so hand them out dynamically one at a time.
  const bool avx512 = ActiveCpuIsa() >= CpuIsa::kAvx512;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const WorkItem& w = items[i];
      const AttnJob& job = jobs[w.job];
      const int64_t rows = (w.q_end - w.q_begin) * job.group;
      if (avx512 && cpu_avx512::AttendTileSupported(job.head_dim)) {
        float* s =
            Scratch(cpu_avx512::AttendScratchFloatsIsa(rows, job.head_dim));
        cpu_avx512::AttendTileIsa(job, w.q_begin, w.q_end, s);
      } else {
        float* s =
            Scratch(cpu_portable::AttendScratchFloats(rows, job.head_dim));
        cpu_portable::AttendTile(job, w.q_begin, w.q_end, s);
      }
    }
  };
  // Small steps (decode of a small model) are not worth a thread wakeup.
  int64_t macs = 0;
  for (const WorkItem& w : items) {
    const AttnJob& job = jobs[w.job];
    macs += 2 * (w.q_end - w.q_begin) * job.group * job.kv_len * job.head_dim;
  }
  if (pool == nullptr || items.size() <= 1 || macs < 128 * 1024) {
    body(0, static_cast<int64_t>(items.size()));
  } else {
    pool->ParallelFor(static_cast<int64_t>(items.size()), body, 1);
  }
}

}  // namespace

absl::Status VarlenAttention(const KernelContext& ctx, const TensorView& q,
                             const TensorView& k, const TensorView& v,
                             const TensorView& cu_seqlens,
                             const AttentionParams& p, const TensorView& out) {
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  const int64_t num_seqs = cu_seqlens.shape[0] - 1;
  if (cu[0] != 0 || cu[num_seqs] != q.shape[0]) {
    return absl::InvalidArgumentError(
        "VarlenAttention: cu_seqlens must start at 0 and end at total_tokens");
  }
  const int group = p.num_heads / p.num_kv_heads;
  const int d = p.head_dim;
  const bool bf16 = p.bf16_products && Bf16DotInUse();
  std::vector<AttnJob> jobs;
  for (int64_t s = 0; s < num_seqs; ++s) {
    if (cu[s + 1] < cu[s]) {
      return absl::InvalidArgumentError(
          "VarlenAttention: cu_seqlens must be non-decreasing");
    }
    const int64_t len = cu[s + 1] - cu[s];
    if (len == 0) continue;
    for (int kvh = 0; kvh < p.num_kv_heads; ++kvh) {
      AttnJob job;
      job.q = Row<const float>(q, cu[s]) + int64_t{kvh} * group * d;
      job.ldq = q.strides[0];
      job.out = Row<float>(out, cu[s]) + int64_t{kvh} * group * d;
      job.ldo = out.strides[0];
      job.q_len = len;
      job.first_pos = 0;
      job.kv_len = len;
      job.k = Row<const float>(k, cu[s]) + int64_t{kvh} * d;
      job.v = Row<const float>(v, cu[s]) + int64_t{kvh} * d;
      job.ldk = k.strides[0];
      job.ldv = v.strides[0];
      job.kv_head = kvh;
      job.group = group;
      job.head_dim = d;
      job.scale = p.scale;
      job.softcap = p.logits_soft_cap;
      job.window = p.sliding_window;
      job.causal = p.causal;
      if (p.relative_bias != nullptr) {
        job.rel_radius = p.relative_bias_radius;
        job.rel_bias = p.relative_bias + int64_t{kvh} * group *
                                             (2 * int64_t{p.relative_bias_radius} + 1);
      }
      job.bf16 = bf16;
      jobs.push_back(job);
    }
  }
  RunJobs(ctx.pool, jobs);
  return absl::OkStatus();
}

absl::Status ReshapeAndCache(const KernelContext& ctx, const TensorView& k,
                             const TensorView& v,
                             const TensorView& slot_mapping,
                             const TensorView& k_cache,
                             const TensorView& v_cache) {
  const int64_t num_slots = k_cache.shape[0] * k_cache.shape[1];
  const int64_t width = k.shape[1];
  const int32_t* slots = slot_mapping.as<const int32_t>();
  for (int64_t t = 0; t < k.shape[0]; ++t) {
    if (slots[t] >= num_slots) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReshapeAndCache: slot ", slots[t],
                       " outside the cache (", num_slots, " slots)"));
    }
  }
  const bool bf16 = k_cache.dtype == DType::kBF16;
  for (int64_t t = 0; t < k.shape[0]; ++t) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;
    const float* kr = Row<const float>(k, t);
    const float* vr = Row<const float>(v, t);
    if (bf16) {
      uint16_t* kd = k_cache.as<uint16_t>() + slot * width;
      uint16_t* vd = v_cache.as<uint16_t>() + slot * width;
      for (int64_t j = 0; j < width; ++j) {
        kd[j] = FloatToBf16(kr[j]);
        vd[j] = FloatToBf16(vr[j]);
      }
    } else {
      std::memcpy(k_cache.as<float>() + slot * width, kr,
                  width * sizeof(float));
      std::memcpy(v_cache.as<float>() + slot * width, vr,
                  width * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status PagedAttention(const KernelContext& ctx, const TensorView& q,
                            const TensorView& k_cache,
                            const TensorView& v_cache,
                            const PagedAttentionMetadata& md,
                            const AttentionParams& p, const TensorView& out) {
  const int64_t num_seqs = md.query_start_loc.shape[0] - 1;
  for (int64_t s = 0; s < num_seqs; ++s) {
    absl::Status st = ValidatePagedSequence(q, k_cache, md, s);
    if (!st.ok()) return st;
  }
  const int32_t* qsl = md.query_start_loc.as<const int32_t>();
  const int32_t* seq_lens = md.seq_lens.as<const int32_t>();
  const int group = p.num_heads / p.num_kv_heads;
  const int d = p.head_dim;
  std::vector<AttnJob> jobs;
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t q_len = qsl[s + 1] - qsl[s];
    if (q_len == 0) continue;
    for (int kvh = 0; kvh < p.num_kv_heads; ++kvh) {
      AttnJob job;
      job.q = Row<const float>(q, qsl[s]) + int64_t{kvh} * group * d;
      job.ldq = q.strides[0];
      job.out = Row<float>(out, qsl[s]) + int64_t{kvh} * group * d;
      job.ldo = out.strides[0];
      job.q_len = q_len;
      job.first_pos = seq_lens[s] - q_len;
      job.kv_len = seq_lens[s];
      job.k_cache = k_cache.data;
      job.v_cache = v_cache.data;
      job.cache_bf16 = k_cache.dtype == DType::kBF16;
      job.block_table =
          md.block_tables.as<const int32_t>() + s * md.block_tables.shape[1];
      job.block_size = k_cache.shape[1];
      job.slot_stride = k_cache.shape[2] * k_cache.shape[3];
      job.kv_head = kvh;
      job.group = group;
      job.head_dim = d;
      job.scale = p.scale;
      job.softcap = p.logits_soft_cap;
      job.window = p.sliding_window;
      job.causal = true;
      jobs.push_back(job);
    }
  }
  RunJobs(ctx.pool, jobs);
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace inferd
