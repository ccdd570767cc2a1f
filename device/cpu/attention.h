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
  int window = 0;
  bool causal = false;
  // AVX512_BF16 kernel, contiguous keys (k != nullptr): Q K^T and P V as
  // vdpbf16ps products of q, k, the probabilities and v rounded to BF16
  // (F32 sums, F32 softmax).
  bool bf16 = false;
};

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
