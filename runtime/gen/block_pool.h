// BlockPool: the fixed set of KV cache blocks of one model replica: a free
// queue doubling as the LRU list of cached blocks, reference counts, and the
// prefix-cache index (block hash -> block). Follows the block pool design of
// vLLM v1 (paged KV cache with hash-chained prefix caching).
// Not thread-safe; owned by a KVCacheManager on the engine loop.
#ifndef INFERD_RUNTIME_GEN_BLOCK_POOL_H_
#define INFERD_RUNTIME_GEN_BLOCK_POOL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace inferd {

// Hash of one full block: (parent block hash, the block's token ids, a
// model-level salt). Injectable so tests can force collisions.
using BlockHasher = std::function<uint64_t(
    uint64_t parent_hash, absl::Span<const int32_t> token_ids, uint64_t salt)>;

// The default BlockHasher: 64-bit absl::Hash over the triple.
uint64_t DefaultBlockHash(uint64_t parent_hash,
                          absl::Span<const int32_t> token_ids, uint64_t salt);

// Identity of cached KV content. A cached block is matched by its hash, then
// verified by its stored token ids and the content id of its parent, so a
// hash collision can only cause a miss, never wrong KV. Content ids are
// never reused. kRootContentId is the "parent" of a sequence's first block.
inline constexpr uint64_t kRootContentId = 0;

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  // Blocks with no user: never used, or cached and evictable.
  int32_t num_free_blocks() const { return num_free_; }
  // Fraction of blocks held by at least one request, in [0, 1].
  double usage() const;
  bool AllBlocksFree() const { return num_free_ == num_blocks_; }
  int32_t num_cached_blocks() const {
    return static_cast<int32_t>(cached_.size());
  }

  // Takes `n` blocks from the head of the free queue (evicting the cache
  // entries of cached ones), each with ref count 1, appended to `out`.
  // Returns false and changes nothing when fewer than `n` are free.
  bool Allocate(int32_t n, std::vector<int32_t>* out);

  // Adds one user to each (cached) block, taking it off the free queue when
  // it had none.
  void Touch(absl::Span<const int32_t> block_ids);

  // Drops one user from each block, in the order given. A block left without
  // users joins the free queue: at the tail when it is cached (evicted last,
  // least recently used first), at the head when it is not (nothing to keep).
  void Free(absl::Span<const int32_t> block_ids);

  // The cached block holding `token_ids` after the content `parent_content`,
  // found under `hash`; -1 when there is none (or only a colliding one).
  int32_t Lookup(uint64_t hash, uint64_t parent_content,
                 absl::Span<const int32_t> token_ids) const;

  // Publishes full block `block_id` (which must hold `token_ids`, computed
  // after the content `parent_content`) under `hash`. Returns the content id
  // to use as the parent of the next block: the block's own new id, or the
  // id of an already cached block with identical content (the duplicate is
  // then not indexed). Returns 0 (kRootContentId) when another content
  // already owns `hash` (a collision): the caller stops publishing.
  uint64_t Publish(int32_t block_id, uint64_t hash, uint64_t parent_content,
                   absl::Span<const int32_t> token_ids);

  // Per-block inspection, for the manager and tests.
  int32_t ref_count(int32_t block_id) const {
    return meta_[block_id].ref_count;
  }
  bool is_cached(int32_t block_id) const { return meta_[block_id].cached; }
  uint64_t content_id(int32_t block_id) const {
    return meta_[block_id].content_id;
  }
  uint64_t num_collisions() const { return num_collisions_; }
  // Free-queue order from head (next allocated) to tail; O(num_blocks).
  std::vector<int32_t> FreeQueueForTest() const;

 private:
  struct BlockMeta {
    int32_t ref_count = 0;
    bool cached = false;
    bool in_free_queue = false;
    uint64_t hash = 0;
    uint64_t parent_content = 0;
    uint64_t content_id = 0;
    int32_t prev = -1;  // free-queue links; -1 = none
    int32_t next = -1;
  };

  void QueueRemove(int32_t id);
  void QueuePushBack(int32_t id);
  void QueuePushFront(int32_t id);
  void Evict(int32_t id);
  absl::Span<const int32_t> StoredTokens(int32_t id) const {
    return absl::MakeConstSpan(tokens_).subspan(
        static_cast<size_t>(id) * block_size_, block_size_);
  }

  const int32_t num_blocks_;
  const int32_t block_size_;
  std::vector<BlockMeta> meta_;
  // Token ids of each cached block (num_blocks x block_size), compared on
  // lookup so a hash collision can never return another content's KV.
  std::vector<int32_t> tokens_;
  int32_t head_ = -1;
  int32_t tail_ = -1;
  int32_t num_free_ = 0;
  absl::flat_hash_map<uint64_t, int32_t> cached_;  // hash -> block id
  uint64_t next_content_id_ = kRootContentId + 1;
  uint64_t num_collisions_ = 0;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_BLOCK_POOL_H_
