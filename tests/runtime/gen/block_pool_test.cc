#include "runtime/gen/block_pool.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inferd {
namespace {

using ::testing::ElementsAre;

TEST(BlockPoolTest, AllocatesFromTheFreeQueueAndRefusesBeyondIt) {
  BlockPool pool(4, 2);
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(3, &got));
  EXPECT_THAT(got, ElementsAre(0, 1, 2));
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.75);
  EXPECT_FALSE(pool.AllBlocksFree());
  for (int32_t id : got) EXPECT_EQ(pool.ref_count(id), 1);

  std::vector<int32_t> more;
  EXPECT_FALSE(pool.Allocate(2, &more));
  EXPECT_TRUE(more.empty());
  EXPECT_EQ(pool.num_free_blocks(), 1);

  pool.Free(got);
  EXPECT_TRUE(pool.AllBlocksFree());
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
}

TEST(BlockPoolTest, SharedBlockStaysInUseUntilItsLastUserFrees) {
  BlockPool pool(2, 2);
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(1, &got));
  pool.Touch(got);
  EXPECT_EQ(pool.ref_count(got[0]), 2);
  pool.Free(got);
  EXPECT_EQ(pool.ref_count(got[0]), 1);
  EXPECT_EQ(pool.num_free_blocks(), 1);
  pool.Free(got);
  EXPECT_EQ(pool.num_free_blocks(), 2);
}

TEST(BlockPoolTest, LookupVerifiesTokensAndParentContent) {
  BlockPool pool(2, 2);
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(1, &got));
  const std::vector<int32_t> tokens = {7, 8};
  const uint64_t content = pool.Publish(got[0], 99, kRootContentId, tokens);
  EXPECT_NE(content, kRootContentId);
  EXPECT_TRUE(pool.is_cached(got[0]));
  EXPECT_EQ(pool.Lookup(99, kRootContentId, tokens), got[0]);
  EXPECT_EQ(pool.Lookup(98, kRootContentId, tokens), -1);
  EXPECT_EQ(pool.Lookup(99, kRootContentId, std::vector<int32_t>{7, 9}), -1);
  EXPECT_EQ(pool.Lookup(99, content + 1, tokens), -1);
}

TEST(BlockPoolTest, PublishingIdenticalContentReusesTheCachedIdentity) {
  BlockPool pool(3, 2);
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(3, &got));
  const std::vector<int32_t> tokens = {1, 2};
  const uint64_t first = pool.Publish(got[0], 5, kRootContentId, tokens);
  // The same content computed again by another request.
  EXPECT_EQ(pool.Publish(got[1], 5, kRootContentId, tokens), first);
  EXPECT_FALSE(pool.is_cached(got[1]));
  // A different content under the same hash is a collision.
  EXPECT_EQ(pool.Publish(got[2], 5, kRootContentId, std::vector<int32_t>{3, 4}),
            kRootContentId);
  EXPECT_FALSE(pool.is_cached(got[2]));
  EXPECT_EQ(pool.num_collisions(), 1u);
  EXPECT_EQ(pool.Lookup(5, kRootContentId, tokens), got[0]);
}

TEST(BlockPoolTest, EvictsLeastRecentlyFreedCachedBlockFirst) {
  BlockPool pool(4, 1);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.Allocate(4, &b));
  for (int32_t i = 0; i < 3; ++i) {
    pool.Publish(b[i], 100 + i, kRootContentId, std::vector<int32_t>{i});
  }
  // Cached blocks join the tail in the order freed; the uncached one goes
  // to the head since it has nothing worth keeping.
  pool.Free({b[2]});
  pool.Free({b[0]});
  pool.Free({b[1]});
  pool.Free({b[3]});
  EXPECT_THAT(pool.FreeQueueForTest(), ElementsAre(b[3], b[2], b[0], b[1]));

  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(2, &got));
  EXPECT_THAT(got, ElementsAre(b[3], b[2]));
  EXPECT_FALSE(pool.is_cached(b[2]));
  EXPECT_EQ(pool.Lookup(102, kRootContentId, std::vector<int32_t>{2}), -1);
  EXPECT_EQ(pool.Lookup(100, kRootContentId, std::vector<int32_t>{0}), b[0]);
  EXPECT_EQ(pool.Lookup(101, kRootContentId, std::vector<int32_t>{1}), b[1]);
  EXPECT_EQ(pool.num_cached_blocks(), 2);
}

TEST(BlockPoolTest, TouchingAnEvictableCachedBlockProtectsItFromEviction) {
  BlockPool pool(2, 1);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.Allocate(2, &b));
  pool.Publish(b[0], 1, kRootContentId, std::vector<int32_t>{4});
  pool.Free(b);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  pool.Touch({b[0]});
  EXPECT_EQ(pool.num_free_blocks(), 1);
  std::vector<int32_t> got;
  EXPECT_FALSE(pool.Allocate(2, &got));
  ASSERT_TRUE(pool.Allocate(1, &got));
  EXPECT_EQ(got[0], b[1]);
  EXPECT_EQ(pool.Lookup(1, kRootContentId, std::vector<int32_t>{4}), b[0]);
}

}  // namespace
}  // namespace inferd
