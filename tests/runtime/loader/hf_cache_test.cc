// Hugging Face names and the HF cache layout (runtime/loader/hf_cache.h):
// names parsed, snapshots found through refs, GGUF files picked, and what
// is missing named. The layout against huggingface_hub itself:
// tests/runtime/loader/hf_cache_test.py.
#include "runtime/loader/hf_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "gtest/gtest.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

TEST(HfCacheTest, ParsesHubNames) {
  auto r = ParseHubModelRef("HuggingFaceTB/SmolLM2-135M-Instruct");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->repo, "HuggingFaceTB/SmolLM2-135M-Instruct");
  EXPECT_EQ(r->revision, "main");
  EXPECT_EQ(r->file, "");
  EXPECT_EQ(r->quant, "");
  r = ParseHubModelRef("bartowski/Qwen3-0.6B-GGUF:Q4_K_M@v1.0");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->repo, "bartowski/Qwen3-0.6B-GGUF");
  EXPECT_EQ(r->quant, "Q4_K_M");
  EXPECT_EQ(r->revision, "v1.0");
  r = ParseHubModelRef("org/repo/sub/model-q8_0.gguf");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->repo, "org/repo");
  EXPECT_EQ(r->file, "sub/model-q8_0.gguf");
  for (const char* local :
       {"/models/x", "./org/repo", "../a/b", "~/a/b", "model.gguf", "org",
        "org/", "/org/repo", "org/re po", "org/repo@", "org/repo:",
        "org/../etc"}) {
    EXPECT_FALSE(ParseHubModelRef(local).has_value()) << local;
  }
}

class CacheDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("inferd-hf-cache-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // models--org--repo with `files` in snapshot `commit`, refs/main -> it;
  // each file a symlink to its blob, as huggingface_hub writes them.
  fs::path Repo(const std::string& dir, const std::string& commit,
                const std::vector<std::string>& files) {
    const fs::path repo = root_ / dir;
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "snapshots" / commit);
    std::ofstream(repo / "refs" / "main") << commit;
    int n = 0;
    for (const std::string& f : files) {
      const std::string blob = "blob" + std::to_string(n++);
      std::ofstream(repo / "blobs" / blob) << f;
      const fs::path link = repo / "snapshots" / commit / f;
      fs::create_directories(link.parent_path());
      fs::create_symlink(fs::relative(repo / "blobs" / blob,
                                      link.parent_path()),
                         link);
    }
    return repo;
  }

  fs::path root_;
};

const std::string kCommit(40, 'a');
const std::string kOther = "0123456789abcdef0123456789abcdef01234567";

TEST_F(CacheDir, FindsTheSnapshotOfARevision) {
  Repo("models--org--tiny", kCommit, {"config.json", "model.safetensors"});
  auto p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/tiny"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, (root_ / "models--org--tiny" / "snapshots" / kCommit).string());
  // A commit by its hash, and a tag through refs/.
  fs::create_directories(root_ / "models--org--tiny" / "snapshots" / kOther);
  p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/tiny@" + kOther));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(fs::path(*p).filename(), kOther);
  std::ofstream(root_ / "models--org--tiny" / "refs" / "v1") << kOther << "\n";
  p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/tiny@v1"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(fs::path(*p).filename(), kOther);
}

TEST_F(CacheDir, PicksAGgufFile) {
  Repo("models--org--tiny-GGUF", kCommit,
       {"tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf", "README.md"});
  const std::string snap =
      (root_ / "models--org--tiny-GGUF" / "snapshots" / kCommit).string();
  auto p = ResolveInHfCache(root_.string(),
                            *ParseHubModelRef("org/tiny-GGUF:q8_0"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, snap + "/tiny-Q8_0.gguf");
  p = ResolveInHfCache(root_.string(),
                       *ParseHubModelRef("org/tiny-GGUF/tiny-Q4_K_M.gguf"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, snap + "/tiny-Q4_K_M.gguf");
  // Two files and no choice: the message lists them.
  p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/tiny-GGUF"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("tiny-Q4_K_M.gguf, tiny-Q8_0.gguf"),
            std::string::npos)
      << p.status();
  p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/tiny-GGUF:IQ2"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  // One file: the repo name alone is enough.
  Repo("models--org--one-GGUF", kCommit, {"one-f16.gguf"});
  p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/one-GGUF"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(fs::path(*p).filename(), "one-f16.gguf");
}

TEST_F(CacheDir, NamesWhatIsMissing) {
  auto p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/absent"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("models--org--absent"), std::string::npos);
  EXPECT_NE(p.status().message().find("hf download org/absent"),
            std::string::npos);
  Repo("models--org--tiny", kCommit, {"config.json"});
  p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/tiny@dev"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("refs/dev"), std::string::npos);
  p = ResolveInHfCache(root_.string(),
                       *ParseHubModelRef("org/tiny@" + kOther));
  EXPECT_NE(p.status().message().find("snapshot " + kOther), std::string::npos);
  p = ResolveInHfCache(root_.string(), *ParseHubModelRef("org/tiny/x.gguf"));
  EXPECT_NE(p.status().message().find("x.gguf is not in the cached snapshot"),
            std::string::npos);
}

TEST(HfCacheEnvTest, CacheDirFollowsTheEnvironment) {
  ::setenv("HF_HUB_CACHE", "/a/hub", 1);
  ::setenv("HF_HOME", "/b", 1);
  EXPECT_EQ(HfHubCacheDir(), "/a/hub");
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(HfHubCacheDir(), "/b/hub");
  ::unsetenv("HF_HOME");
  ::setenv("XDG_CACHE_HOME", "/c", 1);
  EXPECT_EQ(HfHubCacheDir(), "/c/huggingface/hub");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(HfHubCacheDir(), "/home/u/.cache/huggingface/hub");
}

}  // namespace
}  // namespace inferd
