// KVCacheManager: per-request KV block tables over a BlockPool, with prefix
// caching (full blocks hash-chained over (parent hash, token ids, salt) and
// shared between requests). The scheduler asks it for slots; it never sees
// device memory. Follows vLLM v1's KVCacheManager design.
// Not thread-safe; owned by the scheduler on the engine loop.
#ifndef INFERD_RUNTIME_GEN_KV_CACHE_MANAGER_H_
#define INFERD_RUNTIME_GEN_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "runtime/gen/block_pool.h"

namespace inferd {

struct KVCacheConfig {
  int32_t num_blocks = 0;  // sized by the engine from device memory
  int32_t block_size = 16;
  bool enable_prefix_caching = true;
  // Model-level salt mixed into every block hash (e.g. a hash of the model
  // path and dtype), so two models never share a cache entry.
  uint64_t hash_salt = 0;
  BlockHasher hasher;  // empty: DefaultBlockHash
};

// The cached leading full blocks of a token sequence.
struct PrefixHit {
  std::vector<int32_t> block_ids;
  std::vector<uint64_t> block_hashes;
  int32_t num_tokens = 0;        // block_ids.size() * block_size
  int32_t num_query_tokens = 0;  // length of the looked-up sequence
};

class KVCacheManager {
 public:
  explicit KVCacheManager(KVCacheConfig config);

  KVCacheManager(const KVCacheManager&) = delete;
  KVCacheManager& operator=(const KVCacheManager&) = delete;

  const KVCacheConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  // Blocks needed to hold `num_tokens` tokens.
  int32_t NumBlocksFor(int32_t num_tokens) const;

  // The longest run of cached leading full blocks of `token_ids`, never
  // covering the last token (it must be computed so logits exist). Empty
  // when prefix caching is off. No side effects: blocks are taken by
  // AllocateSlots.
  PrefixHit FindCachedPrefix(absl::Span<const int32_t> token_ids) const;

  // Grows `seq_id`'s block table to hold `num_tokens` tokens. For a request
  // without blocks, `hit` (from FindCachedPrefix in the same step; may be
  // null) is taken first and counted in the prefix stats. Returns false and
  // changes nothing when the pool lacks free blocks.
  bool AllocateSlots(int64_t seq_id, int32_t num_tokens,
                     const PrefixHit* hit = nullptr);

  // Publishes `seq_id`'s blocks fully covered by its first
  // `num_computed_tokens` tokens (whose KV is now written) to the prefix
  // cache. `token_ids` are the request's known tokens. No-op when prefix
  // caching is off; a request that opts out simply never calls it.
  void CacheFullBlocks(int64_t seq_id, absl::Span<const int32_t> token_ids,
                       int32_t num_computed_tokens);

  // Shrinks `seq_id`'s block table to what `num_tokens` tokens need (never
  // below its published blocks): rejected speculative drafts give back the
  // blocks allocated for them. No-op for an unknown id.
  void Truncate(int64_t seq_id, int32_t num_tokens);

  // Gives `child_id` (which must have no blocks) the first `num_blocks`
  // blocks of `parent_id`'s table, shared by reference count (parallel
  // samples of one prompt: the blocks must hold only tokens both have), and
  // the parent's prefix-cache chain over them. Returns false and changes
  // nothing when the parent has fewer blocks or the child has some.
  bool Fork(int64_t parent_id, int64_t child_id, int32_t num_blocks);

  // Releases every block of `seq_id` (finish, abort or preemption). Cached
  // blocks stay in the cache, evictable. No-op for an unknown id.
  void Free(int64_t seq_id);

  // `seq_id`'s block table; empty for an unknown id. Valid until the next
  // call that changes the request's blocks.
  absl::Span<const int32_t> BlockTable(int64_t seq_id) const;
  bool HasBlocks(int64_t seq_id) const { return seqs_.contains(seq_id); }

  // Stats.
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  double usage() const { return pool_.usage(); }
  bool AllBlocksFree() const { return pool_.AllBlocksFree(); }
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
  int32_t num_requests() const { return static_cast<int32_t>(seqs_.size()); }
  const BlockPool& pool() const { return pool_; }

 private:
  struct SeqBlocks {
    std::vector<int32_t> blocks;
    // Hash and content id of each published (or hit) leading full block.
    std::vector<uint64_t> hashes;
    std::vector<uint64_t> contents;
    bool publish_stopped = false;  // after a hash collision
  };

  uint64_t Hash(uint64_t parent, absl::Span<const int32_t> tokens) const;

  const KVCacheConfig config_;
  BlockPool pool_;
  absl::flat_hash_map<int64_t, SeqBlocks> seqs_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_KV_CACHE_MANAGER_H_
