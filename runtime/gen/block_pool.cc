#include "runtime/gen/block_pool.h"

#include <algorithm>
#include <cassert>

#include "absl/hash/hash.h"

namespace inferd {

uint64_t DefaultBlockHash(uint64_t parent_hash,
                          absl::Span<const int32_t> token_ids, uint64_t salt) {
  return absl::HashOf(parent_hash, token_ids, salt);
}

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : num_blocks_(std::max(num_blocks, 0)),
      block_size_(std::max(block_size, 1)),
      meta_(static_cast<size_t>(num_blocks_)),
      tokens_(static_cast<size_t>(num_blocks_) * block_size_, 0) {
  for (int32_t i = 0; i < num_blocks_; ++i) QueuePushBack(i);
}

double BlockPool::usage() const {
  if (num_blocks_ == 0) return 0.0;
  return 1.0 - static_cast<double>(num_free_) / num_blocks_;
}

void BlockPool::QueueRemove(int32_t id) {
  BlockMeta& m = meta_[id];
  assert(m.in_free_queue);
  if (m.prev >= 0) {
    meta_[m.prev].next = m.next;
  } else {
    head_ = m.next;
  }
  if (m.next >= 0) {
    meta_[m.next].prev = m.prev;
  } else {
    tail_ = m.prev;
  }
  m.prev = m.next = -1;
  m.in_free_queue = false;
  --num_free_;
}

void BlockPool::QueuePushBack(int32_t id) {
  BlockMeta& m = meta_[id];
  m.prev = tail_;
  m.next = -1;
  if (tail_ >= 0) {
    meta_[tail_].next = id;
  } else {
    head_ = id;
  }
  tail_ = id;
  m.in_free_queue = true;
  ++num_free_;
}

void BlockPool::QueuePushFront(int32_t id) {
  BlockMeta& m = meta_[id];
  m.prev = -1;
  m.next = head_;
  if (head_ >= 0) {
    meta_[head_].prev = id;
  } else {
    tail_ = id;
  }
  head_ = id;
  m.in_free_queue = true;
  ++num_free_;
}

void BlockPool::Evict(int32_t id) {
  BlockMeta& m = meta_[id];
  if (!m.cached) return;
  auto it = cached_.find(m.hash);
  if (it != cached_.end() && it->second == id) cached_.erase(it);
  m.cached = false;
  m.hash = 0;
  m.parent_content = 0;
  m.content_id = 0;
}

bool BlockPool::Allocate(int32_t n, std::vector<int32_t>* out) {
  if (n < 0 || n > num_free_) return false;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = head_;
    QueueRemove(id);
    Evict(id);
    meta_[id].ref_count = 1;
    out->push_back(id);
  }
  return true;
}

void BlockPool::Touch(absl::Span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    BlockMeta& m = meta_[id];
    if (m.ref_count == 0) QueueRemove(id);
    ++m.ref_count;
  }
}

void BlockPool::Free(absl::Span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    BlockMeta& m = meta_[id];
    assert(m.ref_count > 0);
    if (--m.ref_count > 0) continue;
    if (m.cached) {
      QueuePushBack(id);
    } else {
      QueuePushFront(id);
    }
  }
}

int32_t BlockPool::Lookup(uint64_t hash, uint64_t parent_content,
                          absl::Span<const int32_t> token_ids) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return -1;
  const BlockMeta& m = meta_[it->second];
  if (m.parent_content != parent_content) return -1;
  if (token_ids.size() != static_cast<size_t>(block_size_)) return -1;
  absl::Span<const int32_t> stored = StoredTokens(it->second);
  if (!std::equal(stored.begin(), stored.end(), token_ids.begin())) return -1;
  return it->second;
}

uint64_t BlockPool::Publish(int32_t block_id, uint64_t hash,
                            uint64_t parent_content,
                            absl::Span<const int32_t> token_ids) {
  BlockMeta& m = meta_[block_id];
  if (m.cached) return m.content_id;  // reached through a prefix hit
  auto it = cached_.find(hash);
  if (it != cached_.end()) {
    const int32_t existing = Lookup(hash, parent_content, token_ids);
    if (existing >= 0) return meta_[existing].content_id;
    ++num_collisions_;
    return kRootContentId;
  }
  std::copy(token_ids.begin(), token_ids.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(block_id) * block_size_);
  m.cached = true;
  m.hash = hash;
  m.parent_content = parent_content;
  m.content_id = next_content_id_++;
  cached_.emplace(hash, block_id);
  return m.content_id;
}

std::vector<int32_t> BlockPool::FreeQueueForTest() const {
  std::vector<int32_t> order;
  for (int32_t id = head_; id >= 0; id = meta_[id].next) order.push_back(id);
  return order;
}

}  // namespace inferd
