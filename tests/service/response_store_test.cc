// The Responses API's store (service/http/response_store.h): bounded by
// count (least recently used out first) and by age, with deletion.
#include "service/http/response_store.h"

#include <string>

#include "gtest/gtest.h"

namespace inferd::http {
namespace {

StoredResponse Entry(const std::string& text) {
  StoredResponse s;
  s.response = {{"id", text}};
  s.conversation.emplace_back("user", text);
  return s;
}

TEST(ResponseStoreTest, KeepsTheMostRecentlyUsed) {
  ResponseStore store(2, 1 << 20, absl::Hours(1));
  store.Put("a", Entry("A"));
  store.Put("b", Entry("B"));
  ASSERT_TRUE(store.Get("a").has_value());  // a is now the most recent
  store.Put("c", Entry("C"));               // b goes
  EXPECT_FALSE(store.Get("b").has_value());
  ASSERT_TRUE(store.Get("a").has_value());
  EXPECT_EQ(store.Get("a")->conversation[0].content, "A");
  EXPECT_EQ(store.Get("c")->response["id"], "C");
  EXPECT_EQ(store.size(), 2u);
  // Putting an id again replaces it.
  store.Put("c", Entry("C2"));
  EXPECT_EQ(store.Get("c")->response["id"], "C2");
  EXPECT_EQ(store.size(), 2u);
}

TEST(ResponseStoreTest, ForgetsWhatIsTooOld) {
  absl::Time now = absl::FromUnixSeconds(1000);
  ResponseStore store(10, 1 << 20, absl::Seconds(60), [&now] { return now; });
  store.Put("old", Entry("old"));
  now += absl::Seconds(30);
  store.Put("new", Entry("new"));
  now += absl::Seconds(31);  // old is 61 s old, new 31 s
  EXPECT_FALSE(store.Get("old").has_value());
  EXPECT_TRUE(store.Get("new").has_value());
  now += absl::Seconds(30);
  EXPECT_FALSE(store.Get("new").has_value());
  EXPECT_EQ(store.size(), 0u);
}

TEST(ResponseStoreTest, DeletesAndKeepsNothingWhenSizedZero) {
  ResponseStore store(4, 1 << 20, absl::Hours(1));
  store.Put("a", Entry("A"));
  EXPECT_TRUE(store.Delete("a"));
  EXPECT_FALSE(store.Delete("a"));
  EXPECT_FALSE(store.Get("a").has_value());
  ResponseStore none(0, 1 << 20, absl::Hours(1));
  EXPECT_FALSE(none.enabled());
  none.Put("a", Entry("A"));
  EXPECT_FALSE(none.Get("a").has_value());
}

TEST(ResponseStoreTest, KeepsWithinItsBytes) {
  const size_t one = ResponseStore::SizeOf(Entry(std::string(1000, 'x')));
  ResponseStore store(100, 2 * one + one / 2, absl::Hours(1));
  store.Put("a", Entry(std::string(1000, 'a')));
  store.Put("b", Entry(std::string(1000, 'b')));
  EXPECT_EQ(store.bytes(), 2 * one);
  store.Put("c", Entry(std::string(1000, 'c')));  // a goes
  EXPECT_FALSE(store.Get("a").has_value());
  EXPECT_TRUE(store.Get("b").has_value());
  EXPECT_TRUE(store.Get("c").has_value());
  EXPECT_LE(store.bytes(), 2 * one + one / 2);
  // One larger than the whole store is not kept (and evicts nothing).
  store.Put("big", Entry(std::string(10000, 'x')));
  EXPECT_FALSE(store.Get("big").has_value());
  EXPECT_EQ(store.size(), 2u);
  store.Delete("b");
  store.Delete("c");
  EXPECT_EQ(store.bytes(), 0u);
}

}  // namespace
}  // namespace inferd::http
