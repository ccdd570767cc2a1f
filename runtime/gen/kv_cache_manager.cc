#include "runtime/gen/kv_cache_manager.h"

#include <algorithm>
#include <utility>

namespace inferd {
namespace {

KVCacheConfig Normalized(KVCacheConfig config) {
  config.block_size = std::max(config.block_size, 1);
  config.num_blocks = std::max(config.num_blocks, 0);
  if (!config.hasher) config.hasher = DefaultBlockHash;
  return config;
}

}  // namespace

KVCacheManager::KVCacheManager(KVCacheConfig config)
    : config_(Normalized(std::move(config))),
      pool_(config_.num_blocks, config_.block_size) {}

int32_t KVCacheManager::NumBlocksFor(int32_t num_tokens) const {
  if (num_tokens <= 0) return 0;
  return (num_tokens + config_.block_size - 1) / config_.block_size;
}

uint64_t KVCacheManager::Hash(uint64_t parent,
                              absl::Span<const int32_t> tokens) const {
  return config_.hasher(parent, tokens, config_.hash_salt);
}

PrefixHit KVCacheManager::FindCachedPrefix(
    absl::Span<const int32_t> token_ids) const {
  PrefixHit hit;
  hit.num_query_tokens = static_cast<int32_t>(token_ids.size());
  if (!config_.enable_prefix_caching || token_ids.empty()) return hit;
  const int32_t bs = config_.block_size;
  const int32_t max_blocks = (static_cast<int32_t>(token_ids.size()) - 1) / bs;
  uint64_t parent_hash = 0;
  uint64_t parent_content = kRootContentId;
  for (int32_t i = 0; i < max_blocks; ++i) {
    absl::Span<const int32_t> block =
        token_ids.subspan(static_cast<size_t>(i) * bs, static_cast<size_t>(bs));
    const uint64_t h = Hash(parent_hash, block);
    const int32_t id = pool_.Lookup(h, parent_content, block);
    if (id < 0) break;
    hit.block_ids.push_back(id);
    hit.block_hashes.push_back(h);
    parent_hash = h;
    parent_content = pool_.content_id(id);
  }
  hit.num_tokens = static_cast<int32_t>(hit.block_ids.size()) * bs;
  return hit;
}

bool KVCacheManager::AllocateSlots(int64_t seq_id, int32_t num_tokens,
                                   const PrefixHit* hit) {
  auto it = seqs_.find(seq_id);
  const bool is_new = it == seqs_.end();
  const PrefixHit* use_hit = is_new ? hit : nullptr;
  const int32_t num_hit =
      use_hit ? static_cast<int32_t>(use_hit->block_ids.size()) : 0;
  const int32_t have =
      (is_new ? 0 : static_cast<int32_t>(it->second.blocks.size())) + num_hit;
  const int32_t need = std::max(NumBlocksFor(num_tokens) - have, 0);
  // Hit blocks without users sit in the free queue: taking them makes them
  // unavailable for the fresh allocation.
  int32_t evictable_hit = 0;
  for (int32_t i = 0; i < num_hit; ++i) {
    if (pool_.ref_count(use_hit->block_ids[i]) == 0) ++evictable_hit;
  }
  if (need > pool_.num_free_blocks() - evictable_hit) return false;

  SeqBlocks& s = is_new ? seqs_[seq_id] : it->second;
  if (use_hit != nullptr) {
    pool_.Touch(use_hit->block_ids);
    s.blocks = use_hit->block_ids;
    s.hashes = use_hit->block_hashes;
    s.contents.clear();
    for (int32_t id : use_hit->block_ids) {
      s.contents.push_back(pool_.content_id(id));
    }
    prefix_query_tokens_ += use_hit->num_query_tokens;
    prefix_hit_tokens_ += use_hit->num_tokens;
  }
  // Cannot fail: checked above.
  return pool_.Allocate(need, &s.blocks);
}

void KVCacheManager::CacheFullBlocks(int64_t seq_id,
                                     absl::Span<const int32_t> token_ids,
                                     int32_t num_computed_tokens) {
  if (!config_.enable_prefix_caching) return;
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  SeqBlocks& s = it->second;
  if (s.publish_stopped) return;
  const int32_t bs = config_.block_size;
  const int32_t known = static_cast<int32_t>(token_ids.size());
  const int32_t full =
      std::min<int32_t>(std::min(num_computed_tokens, known) / bs,
                        static_cast<int32_t>(s.blocks.size()));
  for (int32_t i = static_cast<int32_t>(s.hashes.size()); i < full; ++i) {
    absl::Span<const int32_t> block =
        token_ids.subspan(static_cast<size_t>(i) * bs, static_cast<size_t>(bs));
    const uint64_t parent_hash = i > 0 ? s.hashes[i - 1] : 0;
    const uint64_t parent_content = i > 0 ? s.contents[i - 1] : kRootContentId;
    const uint64_t h = Hash(parent_hash, block);
    const uint64_t content =
        pool_.Publish(s.blocks[i], h, parent_content, block);
    if (content == kRootContentId) {
      s.publish_stopped = true;
      return;
    }
    s.hashes.push_back(h);
    s.contents.push_back(content);
  }
}

void KVCacheManager::Truncate(int64_t seq_id, int32_t num_tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  SeqBlocks& s = it->second;
  const size_t keep = std::max(static_cast<size_t>(NumBlocksFor(num_tokens)),
                               s.hashes.size());
  if (s.blocks.size() <= keep) return;
  std::vector<int32_t> tail(s.blocks.begin() + static_cast<ptrdiff_t>(keep),
                            s.blocks.end());
  std::reverse(tail.begin(), tail.end());
  pool_.Free(tail);
  s.blocks.resize(keep);
}

bool KVCacheManager::Fork(int64_t parent_id, int64_t child_id,
                          int32_t num_blocks) {
  auto it = seqs_.find(parent_id);
  if (it == seqs_.end() || seqs_.contains(child_id) || num_blocks < 0 ||
      static_cast<size_t>(num_blocks) > it->second.blocks.size()) {
    return false;
  }
  const SeqBlocks& parent = it->second;
  SeqBlocks child;
  child.blocks.assign(parent.blocks.begin(),
                      parent.blocks.begin() + num_blocks);
  // The published part of the chain: the child publishes the rest of its
  // blocks itself (publishing a block the parent publishes too only finds
  // it cached).
  const size_t chain = std::min(parent.hashes.size(),
                                static_cast<size_t>(num_blocks));
  child.hashes.assign(parent.hashes.begin(),
                      parent.hashes.begin() + static_cast<ptrdiff_t>(chain));
  child.contents.assign(
      parent.contents.begin(),
      parent.contents.begin() + static_cast<ptrdiff_t>(chain));
  child.publish_stopped = parent.publish_stopped;
  pool_.Touch(child.blocks);
  seqs_.emplace(child_id, std::move(child));
  return true;
}

void KVCacheManager::Free(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  // Reverse order: a request's tail blocks are evicted before its head
  // blocks, which are the ones other requests are likely to share.
  std::vector<int32_t>& blocks = it->second.blocks;
  std::reverse(blocks.begin(), blocks.end());
  pool_.Free(blocks);
  seqs_.erase(it);
}

absl::Span<const int32_t> KVCacheManager::BlockTable(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return {};
  return it->second.blocks;
}

}  // namespace inferd
