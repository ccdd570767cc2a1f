// tests/common/shared_data.h: ../shared is found through $INFERD_SHARED_DIR
// and a missing file reads as absent (so tests skip rather than fail).
#include "tests/common/shared_data.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace inferd {
namespace {

class SharedDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("INFERD_SHARED_DIR");
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    char tmpl[] = "/tmp/inferd_shared_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (had_old_) {
      setenv("INFERD_SHARED_DIR", old_.c_str(), 1);
    } else {
      unsetenv("INFERD_SHARED_DIR");
    }
    std::remove((dir_ + "/tokenizers/x/tokenizer.json").c_str());
    rmdir((dir_ + "/tokenizers/x").c_str());
    rmdir((dir_ + "/tokenizers").c_str());
    rmdir(dir_.c_str());
  }
  bool had_old_ = false;
  std::string old_;
  std::string dir_;
};

TEST_F(SharedDataTest, FindsFilesWhereTheEnvironmentPoints) {
  ASSERT_EQ(mkdir((dir_ + "/tokenizers").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir_ + "/tokenizers/x").c_str(), 0755), 0);
  std::ofstream(dir_ + "/tokenizers/x/tokenizer.json") << "{}";
  setenv("INFERD_SHARED_DIR", dir_.c_str(), 1);
  EXPECT_EQ(testing_util::SharedDir(), dir_);
  EXPECT_EQ(testing_util::SharedPath("tokenizers/x/tokenizer.json"),
            dir_ + "/tokenizers/x/tokenizer.json");
  EXPECT_EQ(testing_util::SharedPath("tokenizers/y/tokenizer.json"), "");
}

TEST_F(SharedDataTest, AnEmptyFolderHasNothing) {
  setenv("INFERD_SHARED_DIR", dir_.c_str(), 1);
  EXPECT_EQ(testing_util::SharedPath("tokenizers/llama2/tokenizer.json"), "");
}

TEST_F(SharedDataTest, WithoutTheVariableTheBuildDefaultIsUsed) {
  unsetenv("INFERD_SHARED_DIR");
  EXPECT_EQ(testing_util::SharedDir(), std::string(INFERD_DEFAULT_SHARED_DIR));
}

}  // namespace
}  // namespace inferd
