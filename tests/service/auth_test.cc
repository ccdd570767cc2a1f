#include "service/request/auth.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace inferd {
namespace {

TEST(ApiKeyAuthTest, KeysEqualOnlyForIdenticalKeys) {
  EXPECT_TRUE(ApiKeyAuth::KeysEqual("s3cret-key", "s3cret-key"));
  EXPECT_FALSE(ApiKeyAuth::KeysEqual("s3cret-key", "s3cret-kez"));
  EXPECT_FALSE(ApiKeyAuth::KeysEqual("s3cret-key", "s3cret-key-longer"));
  EXPECT_FALSE(ApiKeyAuth::KeysEqual("s3cret-key", "s3cret"));
  EXPECT_FALSE(ApiKeyAuth::KeysEqual("s3cret-key", ""));
  // The given key repeated to the expected length must not pass.
  EXPECT_FALSE(ApiKeyAuth::KeysEqual("abab", "ab"));
}

TEST(ApiKeyAuthTest, EmptyKeyDisablesTheCheck) {
  EXPECT_FALSE(ApiKeyAuth("").enabled());
  EXPECT_TRUE(ApiKeyAuth("k").enabled());
}

TEST(ApiKeyAuthTest, LoadKeyPrefersTheFlagWithoutAFile) {
  auto k = ApiKeyAuth::LoadKey("from-flag", "");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, "from-flag");
}

TEST(ApiKeyAuthTest, LoadKeyTrimsTheFile) {
  const std::string path = ::testing::TempDir() + "/inferd_api_key_test";
  {
    std::ofstream out(path);
    out << "  \tkey-from-file\n\n";
  }
  auto k = ApiKeyAuth::LoadKey("", path);
  std::remove(path.c_str());
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(*k, "key-from-file");
}

TEST(ApiKeyAuthTest, LoadKeyRejectsMissingAndBlankFiles) {
  auto missing = ApiKeyAuth::LoadKey("", "/nonexistent/inferd/key");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("--api-key-file"),
            std::string::npos);
  const std::string path = ::testing::TempDir() + "/inferd_blank_key_test";
  {
    std::ofstream out(path);
    out << " \n";
  }
  auto blank = ApiKeyAuth::LoadKey("", path);
  std::remove(path.c_str());
  EXPECT_EQ(blank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(blank.status().message().find("no key"), std::string::npos);
}

}  // namespace
}  // namespace inferd
