#include "runtime/gen/kv_cache_manager.h"

#include <numeric>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "gtest/gtest.h"

namespace inferd {
namespace {

std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

std::vector<int32_t> Table(const KVCacheManager& kv, int64_t id) {
  absl::Span<const int32_t> t = kv.BlockTable(id);
  return std::vector<int32_t>(t.begin(), t.end());
}

KVCacheConfig Config(int32_t num_blocks, int32_t block_size) {
  KVCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  return c;
}

TEST(KVCacheManagerTest, PrefixHitReturnsThePublishedBlocksAndCountsTokens) {
  KVCacheManager kv(Config(16, 4));
  const std::vector<int32_t> a = Range(0, 10);
  ASSERT_TRUE(kv.AllocateSlots(1, 10));
  EXPECT_EQ(Table(kv, 1).size(), 3u);
  kv.CacheFullBlocks(1, a, 10);

  std::vector<int32_t> b = Range(0, 8);
  b.insert(b.end(), {50, 51, 52, 53});
  PrefixHit hit = kv.FindCachedPrefix(b);
  ASSERT_EQ(hit.num_tokens, 8);
  const std::vector<int32_t> a_table = Table(kv, 1);
  EXPECT_EQ(hit.block_ids,
            std::vector<int32_t>(a_table.begin(), a_table.begin() + 2));
  ASSERT_TRUE(kv.AllocateSlots(2, 12, &hit));
  const std::vector<int32_t> b_table = Table(kv, 2);
  ASSERT_EQ(b_table.size(), 3u);
  EXPECT_EQ(b_table[0], a_table[0]);
  EXPECT_EQ(b_table[1], a_table[1]);
  EXPECT_NE(b_table[2], a_table[2]);
  EXPECT_EQ(kv.pool().ref_count(a_table[0]), 2);
  EXPECT_EQ(kv.prefix_query_tokens(), 12);
  EXPECT_EQ(kv.prefix_hit_tokens(), 8);
  // 3 + 1 distinct blocks in use.
  EXPECT_EQ(kv.num_free_blocks(), 12);
}

TEST(KVCacheManagerTest, NeverServesTheWholePromptFromTheCache) {
  KVCacheManager kv(Config(8, 4));
  const std::vector<int32_t> a = Range(0, 8);
  ASSERT_TRUE(kv.AllocateSlots(1, 8));
  kv.CacheFullBlocks(1, a, 8);
  // Both blocks are cached, but the last token must be computed.
  EXPECT_EQ(kv.FindCachedPrefix(a).num_tokens, 4);
  std::vector<int32_t> longer = a;
  longer.push_back(9);
  EXPECT_EQ(kv.FindCachedPrefix(longer).num_tokens, 8);
}

TEST(KVCacheManagerTest, BlockMatchesOnlyAfterTheSamePrefix) {
  KVCacheManager kv(Config(8, 2));
  ASSERT_TRUE(kv.AllocateSlots(1, 4));
  kv.CacheFullBlocks(1, std::vector<int32_t>{1, 2, 3, 4}, 4);
  // Second block's tokens cached, but after a different first block.
  EXPECT_EQ(kv.FindCachedPrefix(std::vector<int32_t>{9, 9, 3, 4, 5}).num_tokens,
            0);
  EXPECT_EQ(kv.FindCachedPrefix(std::vector<int32_t>{1, 2, 3, 9, 5}).num_tokens,
            2);
}

TEST(KVCacheManagerTest, OnlyBlocksCoveredByComputedTokensArePublished) {
  KVCacheManager kv(Config(8, 4));
  const std::vector<int32_t> a = Range(0, 12);
  ASSERT_TRUE(kv.AllocateSlots(1, 12));
  kv.CacheFullBlocks(1, a, 7);  // one full block computed
  std::vector<int32_t> probe = a;
  probe.push_back(0);
  EXPECT_EQ(kv.FindCachedPrefix(probe).num_tokens, 4);
  kv.CacheFullBlocks(1, a, 12);
  EXPECT_EQ(kv.FindCachedPrefix(probe).num_tokens, 12);
}

TEST(KVCacheManagerTest, DisabledPrefixCachingNeitherFindsNorPublishes) {
  KVCacheConfig c = Config(8, 2);
  c.enable_prefix_caching = false;
  KVCacheManager kv(c);
  ASSERT_TRUE(kv.AllocateSlots(1, 4));
  kv.CacheFullBlocks(1, std::vector<int32_t>{1, 2, 3, 4}, 4);
  EXPECT_EQ(kv.pool().num_cached_blocks(), 0);
  EXPECT_EQ(kv.FindCachedPrefix(std::vector<int32_t>{1, 2, 3, 4, 5}).num_tokens,
            0);
}

TEST(KVCacheManagerTest, FinishedRequestsBlocksStayCachedUntilEvicted) {
  KVCacheManager kv(Config(4, 2));
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(kv.AllocateSlots(1, 8));
  kv.CacheFullBlocks(1, a, 8);
  kv.Free(1);
  EXPECT_TRUE(kv.AllBlocksFree());
  std::vector<int32_t> probe = a;
  probe.push_back(9);
  EXPECT_EQ(kv.FindCachedPrefix(probe).num_tokens, 8);

  // Freed in reverse: the request's tail blocks are evicted first, so its
  // leading blocks survive a 2-block allocation.
  ASSERT_TRUE(kv.AllocateSlots(2, 4));
  EXPECT_EQ(kv.FindCachedPrefix(probe).num_tokens, 4);
  kv.Free(2);
  EXPECT_TRUE(kv.AllBlocksFree());
}

TEST(KVCacheManagerTest, EvictableHitBlocksDoNotCountAsFreeForTheSameRequest) {
  KVCacheManager kv(Config(3, 2));
  ASSERT_TRUE(kv.AllocateSlots(1, 4));
  kv.CacheFullBlocks(1, std::vector<int32_t>{1, 2, 3, 4}, 4);
  kv.Free(1);
  PrefixHit hit = kv.FindCachedPrefix(std::vector<int32_t>{1, 2, 3, 4, 5});
  ASSERT_EQ(hit.num_tokens, 4);
  // 2 hit blocks (free but cached) + 2 new ones > 3 blocks.
  EXPECT_FALSE(kv.AllocateSlots(2, 8, &hit));
  EXPECT_FALSE(kv.HasBlocks(2));
  EXPECT_TRUE(kv.AllBlocksFree());
  ASSERT_TRUE(kv.AllocateSlots(2, 6, &hit));
  EXPECT_EQ(kv.num_free_blocks(), 0);
}

// A hasher that ignores the parent: identical block tokens after different
// prefixes collide. Without the parent-content check this would hand out
// another prefix's KV.
uint64_t TokensOnlyHash(uint64_t, absl::Span<const int32_t> tokens, uint64_t) {
  return absl::HashOf(tokens);
}

TEST(KVCacheManagerTest, ParentIgnoringHashCollisionNeverReturnsWrongBlocks) {
  KVCacheConfig c = Config(8, 2);
  c.hasher = TokensOnlyHash;
  KVCacheManager kv(c);
  const std::vector<int32_t> a = {1, 1, 2, 2};
  const std::vector<int32_t> b = {3, 3, 2, 2};
  ASSERT_TRUE(kv.AllocateSlots(1, 4));
  kv.CacheFullBlocks(1, a, 4);
  ASSERT_TRUE(kv.AllocateSlots(2, 4));
  kv.CacheFullBlocks(2, b, 4);
  EXPECT_EQ(kv.pool().num_collisions(), 1u);

  std::vector<int32_t> probe = b;
  probe.push_back(7);
  PrefixHit hit = kv.FindCachedPrefix(probe);
  ASSERT_EQ(hit.num_tokens, 2);
  EXPECT_EQ(hit.block_ids[0], Table(kv, 2)[0]);
  probe = a;
  probe.push_back(7);
  hit = kv.FindCachedPrefix(probe);
  EXPECT_EQ(hit.num_tokens, 4);
  EXPECT_EQ(hit.block_ids, Table(kv, 1));
}

uint64_t ConstantHash(uint64_t, absl::Span<const int32_t>, uint64_t) {
  return 42;
}

TEST(KVCacheManagerTest, ForcedCollisionsOnlyCauseMisses) {
  KVCacheConfig c = Config(8, 2);
  c.hasher = ConstantHash;
  KVCacheManager kv(c);
  ASSERT_TRUE(kv.AllocateSlots(1, 4));
  kv.CacheFullBlocks(1, std::vector<int32_t>{1, 2, 3, 4}, 4);
  EXPECT_EQ(kv.FindCachedPrefix(std::vector<int32_t>{5, 6, 3, 4, 0}).num_tokens,
            0);
  // Only the first block can be indexed under the single hash value.
  PrefixHit hit = kv.FindCachedPrefix(std::vector<int32_t>{1, 2, 3, 4, 0});
  ASSERT_EQ(hit.num_tokens, 2);
  EXPECT_EQ(hit.block_ids[0], Table(kv, 1)[0]);
}

TEST(KVCacheManagerTest, SaltChangesEveryBlockHash) {
  const std::vector<int32_t> block = {1, 2};
  EXPECT_NE(DefaultBlockHash(0, block, 1), DefaultBlockHash(0, block, 2));
  EXPECT_NE(DefaultBlockHash(0, block, 1), DefaultBlockHash(3, block, 1));
}

TEST(KVCacheManagerTest, RandomAllocateGrowPublishFreeLeavesEveryBlockFree) {
  KVCacheManager kv(Config(64, 4));
  std::mt19937 rng(1234);
  // Few distinct token streams so prefixes are shared often.
  std::vector<std::vector<int32_t>> streams;
  for (int s = 0; s < 4; ++s) {
    std::vector<int32_t> t(200);
    for (auto& x : t) x = static_cast<int32_t>(rng() % 3);
    streams.push_back(t);
  }
  struct Live {
    int stream;
    int32_t len;
  };
  absl::flat_hash_map<int64_t, Live> live;
  int64_t next_id = 0;
  for (int step = 0; step < 5000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 4 || live.empty()) {
      const int s = static_cast<int>(rng() % streams.size());
      const int32_t len = 1 + static_cast<int32_t>(rng() % 40);
      std::vector<int32_t> prompt(streams[s].begin(), streams[s].begin() + len);
      PrefixHit hit = kv.FindCachedPrefix(prompt);
      ASSERT_LT(hit.num_tokens, len);
      if (kv.AllocateSlots(next_id, len, &hit)) {
        // The hit's blocks hold exactly this prompt's leading tokens.
        kv.CacheFullBlocks(next_id, prompt, len);
        live[next_id] = {s, len};
      }
      ++next_id;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      if (op < 7) {
        const int32_t grow = 1 + static_cast<int32_t>(rng() % 8);
        const int32_t len = std::min<int32_t>(it->second.len + grow, 200);
        if (kv.AllocateSlots(it->first, len)) {
          const std::vector<int32_t>& s = streams[it->second.stream];
          kv.CacheFullBlocks(it->first, absl::MakeConstSpan(s).first(len), len);
          it->second.len = len;
        }
      } else {
        kv.Free(it->first);
        live.erase(it);
      }
    }
    // Every block's ref count equals the number of tables holding it.
    std::vector<int32_t> refs(kv.num_blocks(), 0);
    for (const auto& [id, l] : live) {
      absl::Span<const int32_t> t = kv.BlockTable(id);
      ASSERT_EQ(static_cast<int32_t>(t.size()), kv.NumBlocksFor(l.len));
      for (int32_t b : t) ++refs[b];
    }
    int32_t free = 0;
    for (int32_t b = 0; b < kv.num_blocks(); ++b) {
      ASSERT_EQ(kv.pool().ref_count(b), refs[b]) << "block " << b;
      if (refs[b] == 0) ++free;
    }
    ASSERT_EQ(kv.num_free_blocks(), free);
  }
  EXPECT_GT(kv.prefix_hit_tokens(), 0);
  for (const auto& [id, l] : live) kv.Free(id);
  EXPECT_TRUE(kv.AllBlocksFree());
  EXPECT_EQ(kv.num_requests(), 0);
}

}  // namespace
}  // namespace inferd
