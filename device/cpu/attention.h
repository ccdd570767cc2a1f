// Internal: one attention work item (a sequence x kv head) shared by the
// portable and AVX-512 builds of the tiled attention kernel.
#ifndef INFERD_DEVICE_CPU_ATTENTION_H_
#define INFERD_DEVICE_CPU_ATTENTION_H_

#include <cstdint>

namespace inferd {

struct AttnJob {
  // Queries of this sequence, already offset to the first query head of the
  // kv group; row i = new token i. out likewise.
  const float* q = nullptr;
  int64_t ldq = 0;
  float* out = nullptr;
  int64_t ldo = 0;
  int64_t q_len = 0;
  int64_t first_pos = 0;  // position of query 0
  int64_t kv_len = 0;     // keys at positions [0, kv_len)
  // Contiguous keys (offset to this kv head; row j = position j) ...
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t ldk = 0, ldv = 0;
  // ... or a paged cache.
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  bool cache_bf16 = false;
  const int32_t* block_table = nullptr;
  int64_t block_size = 0;
  int64_t slot_stride = 0;  // num_kv_heads * head_dim
  int kv_head = 0;
  int group = 1;  // query heads per kv head
  int head_dim = 0;
  float scale = 1.0f;
  float softcap = 0.0f;
  int window = 0;  // see AttentionParams::sliding_window
  bool causal = false;
  // AttentionParams::relative_bias offset to this job's first query head
  // (rows of 2 * rel_radius + 1); null for none.
  const float* rel_bias = nullptr;
  int rel_radius = 0;
  // AVX512_BF16 kernel, contiguous keys (k != nullptr): Q K^T and P V as
  // vdpbf16ps products of q, k, the probabilities and v rounded to BF16
  // (F32 sums, F32 softmax).
  bool bf16 = false;
};

// Query head `g` of the job's group: its relative bias for key position
// minus query position `rel`.
inline float RelBias(const AttnJob& job, int g, int64_t rel) {
  const int64_t r = job.rel_radius;
  rel = rel < -r ? -r : (rel > r ? r : rel);
  return job.rel_bias[g * (2 * r + 1) + rel + r];
}

// Keys the queries [q_begin, q_end) of `job` may see: [*begin, *end).
inline void KeyRange(const AttnJob& job, int64_t q_begin, int64_t q_end,
                     int64_t* begin, int64_t* end) {
  const int64_t first = job.first_pos + q_begin;
  const int64_t last = job.first_pos + q_end - 1;
  *end = job.causal ? last + 1 : job.kv_len;
  *begin = 0;
  if (job.window > 0) {
    *begin = first - job.window + 1;
    if (*begin < 0) *begin = 0;
    if (!job.causal && last + job.window < *end) *end = last + job.window;
  }
}

// Keys of the tile starting at k0 (nk keys) the query at `pos` may see:
// [*lo, *hi) as offsets into the tile (*hi <= *lo: none).
inline void VisibleKeys(const AttnJob& job, int64_t pos, int64_t k0,
                        int64_t nk, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = nk;
  if (job.causal && pos + 1 - k0 < *hi) *hi = pos + 1 - k0;
  if (job.window > 0) {
    if (pos - job.window + 1 - k0 > *lo) *lo = pos - job.window + 1 - k0;
    if (!job.causal && pos + job.window - k0 < *hi) {
      *hi = pos + job.window - k0;
    }
  }
}

namespace cpu_avx512 {
// Head dims the AVX-512 kernel handles (multiples of 16 up to 256).
bool AttendTileSupported(int head_dim);
int64_t AttendScratchFloatsIsa(int64_t rows, int head_dim);
// Runs job.bf16 jobs on the BF16 path, others on the F32 one.
void AttendTileIsa(const AttnJob& job, int64_t q_begin, int64_t q_end,
                   float* scratch);
}  // namespace cpu_avx512

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_ATTENTION_H_
