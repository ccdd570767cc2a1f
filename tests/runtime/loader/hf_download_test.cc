// The Hugging Face Hub downloader (runtime/loader/hf_download.h): which
// files a repo gives the loader (SelectHubFiles), and FetchHubModel against
// an in-process fake Hub (cpp-httplib on 127.0.0.1) with the Hub's API,
// LFS redirects, Range, and fault switches: a body cut mid-way, a stalled
// body, corrupt bytes, a gated repo, a paginated tree, a server ignoring
// Range, a CDN on another host name. The same Hub in Python, for
// huggingface_hub: tests/service/hub_server.py.
#include "runtime/loader/hf_download.h"

#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/loader/hf_cache.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

constexpr size_t kLfsMin = 1024;  // the fake Hub's LFS threshold

std::string Hex(const unsigned char* p, unsigned int n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < n; ++i) {
    s.push_back(digits[p[i] >> 4]);
    s.push_back(digits[p[i] & 15]);
  }
  return s;
}

std::string Digest(const EVP_MD* md, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, md, nullptr);
  return Hex(out, n);
}

std::string Sha256(const std::string& data) {
  return Digest(EVP_sha256(), data);
}

std::string GitBlobSha1(const std::string& data) {
  return Digest(EVP_sha1(),
                absl::StrCat("blob ", data.size(), std::string(1, '\0'), data));
}

std::string Bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ----------------------------------------------------------------------------
// A fake Hub: the API of tests/service/hub_server.py, in process.

struct FakeRepo {
  std::map<std::string, std::string> files;
  std::string sha;
  std::set<std::string> refs;  // revision names besides "main" and sha
};

struct Faults {
  // The first `cut_times` GETs of a file's bytes break off after
  // `cut_after` body bytes (Content-Length announces them all).
  size_t cut_after = 0;
  int cut_times = 0;
  // The first GET of a file's bytes sends `hold_after` bytes, then stalls
  // until Release().
  size_t hold_after = 0;
  std::set<std::string> corrupt;  // served bytes differ; headers true
  std::set<std::string> gated;    // repo ids: 401 GatedRepo without token
  std::string token;
  size_t tree_page_size = 0;
  bool cdn_other_host = false;  // LFS redirects to http://localhost:PORT
  bool ignore_range = false;    // 200 and the whole file, chunked
  std::map<std::string, int64_t> advertised_size;  // tree / X-Linked-Size
};

struct Logged {
  std::string method, path, range, authorization, host;
};

class FakeHub {
 public:
  FakeHub() {
    server_.Get(".*", [this](const httplib::Request& req,
                             httplib::Response& res) { Handle(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // Once this answers, the accept loop runs (and stop() will end it).
    httplib::Client client("127.0.0.1", port_);
    auto res = client.Get("/ping");
    EXPECT_TRUE(res && res->status == 200);
    std::lock_guard<std::mutex> lock(mu_);
    log_.clear();
  }
  ~FakeHub() {
    Release();
    server_.stop();
    thread_.join();
  }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }

  // Adds `id` with `files`; returns its commit.
  std::string AddRepo(const std::string& id,
                      std::map<std::string, std::string> files,
                      std::set<std::string> refs = {}) {
    FakeRepo repo;
    std::string seed = id;
    for (const auto& [path, data] : files) {
      absl::StrAppend(&seed, path, Sha256(data));
    }
    repo.sha = GitBlobSha1(seed);
    repo.files = std::move(files);
    repo.refs = std::move(refs);
    std::lock_guard<std::mutex> lock(mu_);
    repos_[id] = repo;
    return repo.sha;
  }
  void SetFaults(Faults f) {
    std::lock_guard<std::mutex> lock(mu_);
    faults_ = std::move(f);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::vector<Logged> Log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  void ClearLog() {
    std::lock_guard<std::mutex> lock(mu_);
    log_.clear();
  }
  // GETs of file bytes (resolve or the CDN's /lfs/).
  std::vector<Logged> FileGets() {
    std::vector<Logged> out;
    for (const Logged& l : Log()) {
      if (l.method == "GET" && !absl::StartsWith(l.path, "/api/")) {
        out.push_back(l);
      }
    }
    return out;
  }

 private:
  static void Json(httplib::Response& res, int status,
                   const nlohmann::json& body, const std::string& error_code) {
    res.status = status;
    if (!error_code.empty()) res.set_header("X-Error-Code", error_code);
    res.set_content(body.dump(), "application/json");
  }

  static bool KnownRevision(const FakeRepo& repo, const std::string& rev) {
    return rev == "main" || rev == repo.sha || repo.refs.count(rev) > 0;
  }

  static nlohmann::json Entry(const std::string& path, const std::string& data,
                              const Faults& faults) {
    int64_t size = static_cast<int64_t>(data.size());
    if (auto it = faults.advertised_size.find(path);
        it != faults.advertised_size.end()) {
      size = it->second;
    }
    nlohmann::json e = {{"type", "file"},
                        {"path", path},
                        {"size", size},
                        {"oid", GitBlobSha1(data)}};
    if (data.size() >= kLfsMin) {
      e["lfs"] = {{"oid", Sha256(data)}, {"size", size}, {"pointerSize", 134}};
    }
    return e;
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mu_);
    log_.push_back({req.method, req.path, req.get_header_value("Range"),
                    req.get_header_value("Authorization"),
                    req.get_header_value("Host")});
    const Faults faults = faults_;
    if (req.path == "/ping") {
      res.set_content("ok", "text/plain");
      return;
    }
    absl::string_view path = req.path;
    if (absl::ConsumePrefix(&path, "/api/models/")) {
      std::vector<std::string> parts =
          absl::StrSplit(path, absl::MaxSplits('/', 3));
      if (parts.size() < 4) return Json(res, 404, {{"error", "?"}}, "");
      auto repo_it = repos_.find(parts[0] + "/" + parts[1]);
      if (repo_it == repos_.end()) {
        return Json(res, 404, {{"error", "Repository not found"}},
                    "RepositoryNotFound");
      }
      const FakeRepo& repo = repo_it->second;
      const std::string rev = parts[3];
      if (!KnownRevision(repo, rev)) {
        return Json(res, 404, {{"error", "Invalid rev id: " + rev}},
                    "RevisionNotFound");
      }
      if (parts[2] == "revision") {
        nlohmann::json siblings = nlohmann::json::array();
        for (const auto& [name, data] : repo.files) {
          siblings.push_back({{"rfilename", name}});
        }
        return Json(
            res, 200,
            {{"id", repo_it->first}, {"sha", repo.sha}, {"siblings", siblings}},
            "");
      }
      if (parts[2] == "tree") {
        std::vector<nlohmann::json> entries;
        for (const auto& [name, data] : repo.files) {
          entries.push_back(Entry(name, data, faults));
        }
        size_t start = 0, end = entries.size();
        if (faults.tree_page_size > 0) {
          if (req.has_param("cursor")) {
            start = std::stoul(req.get_param_value("cursor"));
          }
          end = std::min(entries.size(), start + faults.tree_page_size);
          if (end < entries.size()) {
            res.set_header("Link", absl::StrCat("<", url(), "/api/models/",
                                                repo_it->first, "/tree/", rev,
                                                "?recursive=true&cursor=", end,
                                                ">; rel=\"next\""));
          }
        }
        nlohmann::json page = nlohmann::json::array();
        for (size_t i = start; i < end && i < entries.size(); ++i) {
          page.push_back(entries[i]);
        }
        return Json(res, 200, page, "");
      }
      return Json(res, 404, {{"error", "not found"}}, "");
    }
    const bool lfs = absl::ConsumePrefix(&path, "/lfs/");
    if (!lfs) absl::ConsumePrefix(&path, "/");
    std::vector<std::string> parts =
        absl::StrSplit(path, absl::MaxSplits('/', lfs ? 2 : 4));
    auto repo_it = parts.size() >= 2 ? repos_.find(parts[0] + "/" + parts[1])
                                     : repos_.end();
    if (repo_it == repos_.end()) {
      return Json(res, 404, {{"error", "Repository not found"}},
                  "RepositoryNotFound");
    }
    const std::string repo_id = repo_it->first;
    const FakeRepo& repo = repo_it->second;
    std::string file;
    if (lfs) {
      if (parts.size() != 3) return Json(res, 404, {{"error", "?"}}, "");
      file = parts[2];
    } else {
      if (parts.size() != 5 || parts[2] != "resolve") {
        return Json(res, 404, {{"error", "not found"}}, "");
      }
      if (!KnownRevision(repo, parts[3])) {
        return Json(res, 404, {{"error", "Invalid rev id"}},
                    "RevisionNotFound");
      }
      file = parts[4];
      if (faults.gated.count(repo_id)) {
        const std::string auth = req.get_header_value("Authorization");
        if (auth != "Bearer " + faults.token) {
          if (!auth.empty()) {
            return Json(
                res, 401,
                {{"error", "Invalid credentials in Authorization header"}}, "");
          }
          return Json(res, 401,
                      {{"error", "Access to model " + repo_id +
                                     " is restricted. Please log in."}},
                      "GatedRepo");
        }
      }
    }
    auto file_it = repo.files.find(file);
    if (file_it == repo.files.end()) {
      res.set_header("X-Repo-Commit", repo.sha);
      return Json(res, 404, {{"error", "Entry not found"}}, "EntryNotFound");
    }
    const std::string& data = file_it->second;
    const nlohmann::json entry = Entry(file, data, faults);
    res.set_header("X-Repo-Commit", repo.sha);
    if (!lfs && data.size() >= kLfsMin) {
      // The Hub sends LFS files to its CDN with their etag and size.
      res.status = 302;
      res.set_header("Location",
                     absl::StrCat(faults.cdn_other_host
                                      ? absl::StrCat("http://localhost:", port_)
                                      : "",
                                  "/lfs/", repo_id, "/", file));
      res.set_header("X-Linked-Etag", absl::StrCat("\"", Sha256(data), "\""));
      res.set_header("X-Linked-Size",
                     std::to_string(entry["size"].get<int64_t>()));
      res.set_header("ETag", absl::StrCat("\"", GitBlobSha1(data), "\""));
      return;
    }
    res.set_header(
        "ETag",
        absl::StrCat("\"", lfs ? Sha256(data) : GitBlobSha1(data), "\""));
    auto body = std::make_shared<std::string>(data);
    if (faults.corrupt.count(file)) {
      for (size_t i = 0; i < std::min<size_t>(16, body->size()); ++i) {
        (*body)[i] = static_cast<char>((*body)[i] ^ 0x5a);
      }
    }
    size_t limit = SIZE_MAX;  // body bytes this answer sends at most
    bool hold = false;
    if (req.method == "GET") {
      const int n = ++gets_[repo_id + "/" + file];
      if (n <= faults.cut_times) limit = faults.cut_after;
      if (n == 1 && faults.hold_after > 0) {
        limit = faults.hold_after;
        hold = true;
      }
    }
    lock.unlock();
    auto provide = [this, body, limit, hold](size_t start) {
      return [this, body, limit, hold, start](size_t offset, size_t length,
                                              httplib::DataSink& sink) {
        if (offset - start >= limit) {
          if (hold) {
            std::unique_lock<std::mutex> l(mu_);
            cv_.wait(l, [this] { return released_; });
          }
          return false;  // the connection breaks off
        }
        const size_t n =
            std::min({length, size_t{16384}, limit - (offset - start)});
        return sink.write(body->data() + offset, n);
      };
    };
    if (faults.ignore_range) {  // 200 and the whole file, chunked
      res.status = 200;
      auto sent = std::make_shared<size_t>(0);
      res.set_chunked_content_provider(
          "application/octet-stream",
          [body, limit, sent](size_t, httplib::DataSink& sink) {
            if (*sent >= limit) return false;  // the connection breaks off
            if (*sent >= body->size()) {
              sink.done();
              return true;
            }
            const size_t n =
                std::min({size_t{16384}, body->size() - *sent, limit - *sent});
            if (!sink.write(body->data() + *sent, n)) return false;
            *sent += n;
            return true;
          });
      return;
    }
    const size_t start = req.ranges.empty() || req.ranges[0].first < 0
                             ? 0
                             : static_cast<size_t>(req.ranges[0].first);
    res.set_content_provider(body->size(), "application/octet-stream",
                             provide(start));
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::map<std::string, FakeRepo> repos_;
  std::map<std::string, int> gets_;
  Faults faults_;
  std::vector<Logged> log_;
};

// ----------------------------------------------------------------------------
// SelectHubFiles.

HubModelRef Ref(const std::string& name) {
  std::optional<HubModelRef> r = ParseHubModelRef(name);
  EXPECT_TRUE(r.has_value()) << name;
  return r.value_or(HubModelRef{});
}

// A reader over in-memory files that records what it was asked for.
struct Reader {
  std::map<std::string, std::string> files;
  std::vector<std::string> asked;
  HubFileReader fn() {
    return [this](const std::string& p) -> absl::StatusOr<std::string> {
      asked.push_back(p);
      auto it = files.find(p);
      if (it == files.end()) return absl::NotFoundError(p);
      return it->second;
    };
  }
};

std::vector<std::string> Files(std::initializer_list<const char*> names) {
  return std::vector<std::string>(names.begin(), names.end());
}

TEST(SelectHubFilesTest, PicksTheGgufWhoseNameHoldsTheQuant) {
  const auto repo = Files({"README.md", "m-Q4_K_M.gguf", "m-Q8_0.gguf",
                           "m-f16.gguf", ".gitattributes"});
  Reader reader;
  auto s = SelectHubFiles(repo, Ref("org/m:q4_k_m"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, Files({"m-Q4_K_M.gguf"}));
  EXPECT_EQ(s->entry, "m-Q4_K_M.gguf");
  EXPECT_TRUE(reader.asked.empty());

  s = SelectHubFiles(repo, Ref("org/m"), reader.fn());
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(),
                                "m-Q4_K_M.gguf, m-Q8_0.gguf, m-f16.gguf"))
      << s.status();

  s = SelectHubFiles(repo, Ref("org/m:IQ2_XS"), reader.fn());
  ASSERT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "matching 'IQ2_XS'"));

  s = SelectHubFiles(Files({"only.gguf", "README.md"}), Ref("org/m"),
                     reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, Files({"only.gguf"}));
}

TEST(SelectHubFilesTest, TakesEveryPartOfASplitGguf) {
  const auto repo =
      Files({"m-Q4_K_M.gguf", "m-Q8_0-00001-of-00003.gguf",
             "m-Q8_0-00002-of-00003.gguf", "m-Q8_0-00003-of-00003.gguf",
             "big/x-00001-of-00002.gguf", "big/x-00002-of-00002.gguf"});
  Reader reader;
  auto s = SelectHubFiles(repo, Ref("org/m:Q8_0"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files,
            Files({"m-Q8_0-00001-of-00003.gguf", "m-Q8_0-00002-of-00003.gguf",
                   "m-Q8_0-00003-of-00003.gguf"}));
  EXPECT_EQ(s->entry, "m-Q8_0-00001-of-00003.gguf");
  // The parts of one set are one candidate.
  s = SelectHubFiles(repo, Ref("org/m"), reader.fn());
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(),
                                "(m-Q4_K_M.gguf, m-Q8_0-00001-of-00003.gguf)"))
      << s.status();
  // Naming a later part takes the set, opened at its first part.
  s = SelectHubFiles(repo, Ref("org/m/big/x-00002-of-00002.gguf"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files,
            Files({"big/x-00001-of-00002.gguf", "big/x-00002-of-00002.gguf"}));
  EXPECT_EQ(s->entry, "big/x-00001-of-00002.gguf");
  // A set missing a part.
  s = SelectHubFiles(Files({"m-00001-of-00002.gguf"}), Ref("org/m"),
                     reader.fn());
  ASSERT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "m-00002-of-00002.gguf"))
      << s.status();
}

TEST(SelectHubFilesTest, ANamedFileIsJustThatFile) {
  Reader reader;
  auto s = SelectHubFiles(Files({"a.gguf", "b.gguf", "config.json"}),
                          Ref("org/m/b.gguf"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, Files({"b.gguf"}));
  EXPECT_EQ(s->entry, "b.gguf");
  s = SelectHubFiles(Files({"a.gguf"}), Ref("org/m/c.gguf"), reader.fn());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
}

TEST(SelectHubFilesTest, AModelDirectoryGetsConfigsTokenizerAndSafetensors) {
  const auto repo =
      Files({"config.json", "generation_config.json", "tokenizer.json",
             "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
             "merges.txt", "chat_template.jinja", "model.safetensors",
             "pytorch_model.bin", "tf_model.h5", "flax_model.msgpack",
             "model.onnx", "onnx/model.onnx", "README.md", ".gitattributes",
             "preprocessor_config.json", "model-q4.gguf", "training_args.bin"});
  Reader reader;
  auto s = SelectHubFiles(repo, Ref("org/m"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(
      s->files,
      Files({"chat_template.jinja", "config.json", "generation_config.json",
             "merges.txt", "model.safetensors", "special_tokens_map.json",
             "tokenizer.json", "tokenizer_config.json", "vocab.json"}));
  EXPECT_EQ(s->entry, "");
}

TEST(SelectHubFilesTest, ShardsComeFromTheIndex) {
  Reader reader;
  reader.files["model.safetensors.index.json"] = R"({
    "metadata": {"total_size": 3},
    "weight_map": {"a": "model-00001-of-00002.safetensors",
                   "b": "model-00002-of-00002.safetensors",
                   "c": "model-00001-of-00002.safetensors"}})";
  auto repo = Files(
      {"config.json", "model.safetensors.index.json",
       "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
       "model-00003-of-00003.safetensors", "pytorch_model.bin.index.json",
       "pytorch_model-00001-of-00002.bin"});
  auto s = SelectHubFiles(repo, Ref("org/m"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, Files({"config.json", "model-00001-of-00002.safetensors",
                             "model-00002-of-00002.safetensors",
                             "model.safetensors.index.json"}));
  EXPECT_EQ(reader.asked, Files({"model.safetensors.index.json"}));

  repo.erase(
      std::find(repo.begin(), repo.end(), "model-00002-of-00002.safetensors"));
  s = SelectHubFiles(repo, Ref("org/m"), reader.fn());
  ASSERT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.status().message(),
                                "model-00002-of-00002.safetensors"));
}

TEST(SelectHubFilesTest, PytorchWeightsOnlyWhenThereAreNoSafetensors) {
  Reader reader;
  auto s = SelectHubFiles(
      Files({"config.json", "pytorch_model.bin", "vocab.txt", "tf_model.h5"}),
      Ref("org/m"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, Files({"config.json", "pytorch_model.bin", "vocab.txt"}));

  reader.files["pytorch_model.bin.index.json"] =
      R"({"weight_map": {"w": "pytorch_model-00001-of-00001.bin"}})";
  s = SelectHubFiles(Files({"config.json", "pytorch_model.bin.index.json",
                            "pytorch_model-00001-of-00001.bin"}),
                     Ref("org/m"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, Files({"config.json", "pytorch_model-00001-of-00001.bin",
                             "pytorch_model.bin.index.json"}));

  s = SelectHubFiles(Files({"config.json", "README.md"}), Ref("org/m"),
                     reader.fn());
  ASSERT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "no weights"));
}

TEST(SelectHubFilesTest, SentenceTransformersModulesAndM3Heads) {
  Reader reader;
  reader.files["modules.json"] = R"([
    {"idx": 0, "name": "0", "path": "",
     "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling",
     "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Dense/",
     "type": "sentence_transformers.models.Dense"},
    {"idx": 3, "name": "3", "path": "3_Normalize",
     "type": "sentence_transformers.models.Normalize"}])";
  const auto repo = Files(
      {"config.json", "model.safetensors", "pytorch_model.bin", "modules.json",
       "config_sentence_transformers.json", "sentence_bert_config.json",
       "tokenizer.json", "sentencepiece.bpe.model", "README.md",
       "1_Pooling/config.json", "2_Dense/config.json",
       "2_Dense/model.safetensors", "2_Dense/pytorch_model.bin",
       "2_Dense/onnx/model.onnx", "4_Other/config.json", "sparse_linear.pt",
       "colbert_linear.pt", "colbert_linear.safetensors", "onnx/model.onnx"});
  auto s = SelectHubFiles(repo, Ref("org/m"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(
      s->files,
      Files({"1_Pooling/config.json", "2_Dense/config.json",
             "2_Dense/model.safetensors", "colbert_linear.safetensors",
             "config.json", "config_sentence_transformers.json",
             "model.safetensors", "modules.json", "sentence_bert_config.json",
             "sentencepiece.bpe.model", "sparse_linear.pt", "tokenizer.json"}));
  EXPECT_EQ(reader.asked, Files({"modules.json"}));

  // An old layout: the whole Transformer in a module directory.
  reader.files["modules.json"] =
      R"([{"path": "0_Transformer"}, {"path": "1_Pooling"}])";
  s = SelectHubFiles(
      Files({"modules.json", "0_Transformer/config.json",
             "0_Transformer/pytorch_model.bin", "0_Transformer/vocab.txt",
             "1_Pooling/config.json"}),
      Ref("org/m"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files,
            Files({"0_Transformer/config.json",
                   "0_Transformer/pytorch_model.bin", "0_Transformer/vocab.txt",
                   "1_Pooling/config.json", "modules.json"}));

  reader.files["modules.json"] = R"([{"path": "../../etc"}])";
  s = SelectHubFiles(
      Files({"modules.json", "config.json", "model.safetensors"}), Ref("org/m"),
      reader.fn());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SelectHubFilesTest, AConfigJsonMakesADirectoryUnlessAQuantIsNamed) {
  Reader reader;
  const auto repo =
      Files({"config.json", "model.safetensors", "m-Q4_0.gguf", "m-Q8_0.gguf"});
  auto s = SelectHubFiles(repo, Ref("org/m"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, Files({"config.json", "model.safetensors"}));
  s = SelectHubFiles(repo, Ref("org/m:Q8_0"), reader.fn());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, Files({"m-Q8_0.gguf"}));
}

// ----------------------------------------------------------------------------
// FetchHubModel against the fake Hub.

class FetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        fs::temp_directory_path() /
        absl::StrCat(
            "inferd-hf-download-", ::getpid(), "-",
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    options_.endpoint = hub_.url();
    options_.cache_dir = (root_ / "hub").string();
    options_.token.clear();
    options_.offline = false;
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path RepoDir(const std::string& repo) {
    return fs::path(options_.cache_dir) /
           absl::StrCat("models--", absl::StrReplaceAll(repo, {{"/", "--"}}));
  }

  // Every file under `dir`, relative, sorted (symlinks not followed).
  static std::vector<std::string> Tree(const fs::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    if (!fs::exists(dir, ec)) return out;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_directory(ec) || it->is_symlink(ec)) {
        out.push_back(it->path().lexically_relative(dir).string());
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  absl::StatusOr<std::string> Fetch(const std::string& name) {
    return FetchHubModel(Ref(name), options_);
  }

  FakeHub hub_;
  fs::path root_;
  HubFetchOptions options_;
};

std::map<std::string, std::string> StModel() {
  return {
      {"config.json", R"({"model_type": "bert"})"},
      {"tokenizer.json", R"({"version": "1.0"})"},
      {"modules.json", R"([{"path": ""}, {"path": "1_Pooling"}])"},
      {"1_Pooling/config.json", R"({"pooling_mode_mean_tokens": true})"},
      {"model.safetensors", Bytes(50000, 1)},
      {"pytorch_model.bin", Bytes(3000, 2)},
      {"README.md", "# a model"},
  };
}

TEST_F(FetchTest, AFreshFetchLaysOutTheCacheAsHuggingFaceHubDoes) {
  auto files = StModel();
  const std::string sha = hub_.AddRepo("org/st", files);
  auto path = Fetch("org/st");
  ASSERT_TRUE(path.ok()) << path.status();
  const fs::path repo = RepoDir("org/st");
  const fs::path snap = repo / "snapshots" / sha;
  EXPECT_EQ(*path, snap.string());
  EXPECT_EQ(ResolveInHfCache(options_.cache_dir, Ref("org/st")).value_or(""),
            *path);
  EXPECT_EQ(ReadFile(repo / "refs" / "main"), sha);  // no newline

  const std::vector<std::string> wanted = {"1_Pooling/config.json",
                                           "config.json", "model.safetensors",
                                           "modules.json", "tokenizer.json"};
  EXPECT_EQ(Tree(snap), wanted);
  std::vector<std::string> blobs;
  for (const std::string& f : wanted) {
    const std::string& data = files[f];
    const std::string etag =
        data.size() >= kLfsMin ? Sha256(data) : GitBlobSha1(data);
    blobs.push_back(etag);
    const fs::path link = snap / f;
    ASSERT_TRUE(fs::is_symlink(link)) << f;
    const std::string up =
        f.find('/') == std::string::npos ? "../../" : "../../../";
    EXPECT_EQ(fs::read_symlink(link).string(), up + "blobs/" + etag) << f;
    EXPECT_EQ(ReadFile(link), data) << f;
    EXPECT_TRUE(fs::exists(options_.cache_dir + "/.locks/models--org--st/" +
                           etag + ".lock"));
  }
  std::sort(blobs.begin(), blobs.end());
  EXPECT_EQ(Tree(repo / "blobs"), blobs);  // no .incomplete, nothing else
  EXPECT_EQ(Tree(repo / "refs"), std::vector<std::string>{"main"});
  // Nothing but refs/, blobs/ and snapshots/ in the repo folder.
  std::vector<std::string> top;
  for (const auto& e : fs::directory_iterator(repo)) {
    top.push_back(e.path().filename().string());
  }
  std::sort(top.begin(), top.end());
  EXPECT_EQ(top, (std::vector<std::string>{"blobs", "refs", "snapshots"}));
}

TEST_F(FetchTest, ASecondFetchOnlyAsksTheApiAndHeads) {
  hub_.AddRepo("org/st", StModel());
  auto first = Fetch("org/st");
  ASSERT_TRUE(first.ok()) << first.status();
  // The LFS file straight from the CDN URL the HEAD gave.
  EXPECT_EQ(hub_.FileGets().size(), 5u);
  hub_.ClearLog();
  auto second = Fetch("org/st");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, *first);
  EXPECT_TRUE(hub_.FileGets().empty());
  int heads = 0;
  for (const Logged& l : hub_.Log()) heads += l.method == "HEAD";
  EXPECT_EQ(heads, 5);
}

TEST_F(FetchTest, ACutDownloadResumesWithARange) {
  auto files = StModel();
  const std::string sha = hub_.AddRepo("org/st", files);
  Faults f;
  f.cut_after = 20000;
  f.cut_times = 1;
  hub_.SetFaults(f);
  auto path = Fetch("org/st");
  ASSERT_TRUE(path.ok()) << path.status();
  std::vector<std::string> ranges;
  for (const Logged& l : hub_.FileGets()) {
    if (!l.range.empty()) ranges.push_back(l.path + " " + l.range);
  }
  // The retry starts at the Hub again (resolve, then the CDN), both ranged.
  EXPECT_EQ(ranges,
            (std::vector<std::string>{
                "/org/st/resolve/" + sha + "/model.safetensors bytes=20000-",
                "/lfs/org/st/model.safetensors bytes=20000-"}));
  const fs::path blob = fs::canonical(fs::path(*path) / "model.safetensors");
  EXPECT_EQ(Sha256(ReadFile(blob)), blob.filename().string());
  EXPECT_EQ(ReadFile(blob), files["model.safetensors"]);
}

TEST_F(FetchTest, AServerIgnoringTheRangeRestartsTheFile) {
  auto files = StModel();
  hub_.AddRepo("org/st", files);
  Faults f;
  f.cut_after = 20000;
  f.cut_times = 1;
  f.ignore_range = true;
  hub_.SetFaults(f);
  std::vector<std::pair<int64_t, int64_t>> calls;
  options_.progress = [&](int64_t d, int64_t t) { calls.emplace_back(d, t); };
  auto path = Fetch("org/st");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(ReadFile(fs::path(*path) / "model.safetensors"),
            files["model.safetensors"]);
  bool ranged = false;
  for (const Logged& l : hub_.FileGets()) ranged |= !l.range.empty();
  EXPECT_TRUE(ranged);
  ASSERT_FALSE(calls.empty());
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GE(calls[i].first, calls[i - 1].first);
  }
  EXPECT_EQ(calls.back().first, calls.back().second);
}

TEST_F(FetchTest, GivesUpAfterFiveBrokenTransfers) {
  hub_.AddRepo("org/st", StModel());
  Faults f;
  f.cut_after = 1000;
  f.cut_times = 100;
  hub_.SetFaults(f);
  auto path = Fetch("org/st");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kUnavailable)
      << path.status();
  EXPECT_TRUE(absl::StrContains(path.status().message(), "5 attempts"))
      << path.status();
  int cdn_gets = 0;
  for (const Logged& l : hub_.FileGets()) {
    cdn_gets += absl::StartsWith(l.path, "/lfs/");
  }
  EXPECT_EQ(cdn_gets, 5);
  const std::string blob = Sha256(StModel()["model.safetensors"]);
  EXPECT_EQ(fs::file_size(RepoDir("org/st") / "blobs" / (blob + ".incomplete")),
            5000u);
  EXPECT_FALSE(fs::exists(RepoDir("org/st") / "refs"));
  for (const std::string& f : Tree(RepoDir("org/st") / "snapshots")) {
    EXPECT_FALSE(absl::EndsWith(f, "model.safetensors")) << f;
  }
}

TEST_F(FetchTest, AWrongSha256IsDataLossAndKeepsNothing) {
  auto files = StModel();
  hub_.AddRepo("org/st", files);
  Faults f;
  f.corrupt = {"model.safetensors"};
  hub_.SetFaults(f);
  auto path = Fetch("org/st");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kDataLoss) << path.status();
  const std::string want = Sha256(files["model.safetensors"]);
  const std::string m(path.status().message());
  EXPECT_TRUE(absl::StrContains(m, "model.safetensors")) << m;
  EXPECT_TRUE(absl::StrContains(m, "expected " + want)) << m;
  EXPECT_TRUE(absl::StrContains(m, "got ")) << m;
  EXPECT_FALSE(fs::exists(RepoDir("org/st") / "blobs" / want));
  EXPECT_FALSE(
      fs::exists(RepoDir("org/st") / "blobs" / (want + ".incomplete")));
  for (const std::string& s : Tree(RepoDir("org/st") / "snapshots")) {
    EXPECT_FALSE(absl::EndsWith(s, "model.safetensors")) << s;
  }
  EXPECT_FALSE(fs::exists(RepoDir("org/st") / "refs" / "main"));
}

TEST_F(FetchTest, MissingRepoRevisionAndFileAreNotFound) {
  hub_.AddRepo("org/st", StModel(), {"v1"});
  auto path = Fetch("org/nope");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  std::string m(path.status().message());
  EXPECT_TRUE(absl::StrContains(m, "no repo org/nope at " + hub_.url())) << m;
  EXPECT_TRUE(absl::StrContains(m, "HTTP 404")) << m;
  EXPECT_TRUE(absl::StrContains(m, hub_.url() + "/api/models/org/nope/")) << m;
  EXPECT_TRUE(absl::StrContains(m, "HF_TOKEN")) << m;

  path = Fetch("org/st@v2");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  m = std::string(path.status().message());
  EXPECT_TRUE(absl::StrContains(m, "no revision 'v2'")) << m;
  EXPECT_TRUE(absl::StrContains(m, "HTTP 404")) << m;

  path = Fetch("org/st/nothere.gguf");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(path.status().message(), "nothere.gguf"));

  EXPECT_TRUE(Fetch("org/st@v1").ok());
}

TEST_F(FetchTest, RejectsNamesThatAreNotRepoIds) {
  HubModelRef ref;
  ref.repo = "../etc";
  auto path = FetchHubModel(ref, options_);
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument);
  ref.repo = "org/st";
  ref.revision = "../../x";
  path = FetchHubModel(ref, options_);
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hub_.Log().empty());
  EXPECT_FALSE(fs::exists(options_.cache_dir));
}

TEST_F(FetchTest, AGatedRepoNeedsTheTokenWhichTheCdnNeverSees) {
  hub_.AddRepo("org/gated", StModel());
  Faults f;
  f.gated = {"org/gated"};
  f.token = "hf_secret";
  f.cdn_other_host = true;
  hub_.SetFaults(f);
  auto path = Fetch("org/gated");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kPermissionDenied);
  std::string m(path.status().message());
  EXPECT_TRUE(absl::StrContains(m, "HF_TOKEN")) << m;
  EXPECT_TRUE(absl::StrContains(m, "HTTP 401")) << m;
  EXPECT_TRUE(absl::StrContains(m, "/org/gated/resolve/")) << m;

  options_.token = "hf_wrong";
  path = Fetch("org/gated");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(
      absl::StrContains(path.status().message(), "HF_TOKEN is not accepted"))
      << path.status();

  options_.token = "hf_secret";
  hub_.ClearLog();
  path = Fetch("org/gated");
  ASSERT_TRUE(path.ok()) << path.status();
  int cdn = 0, hub = 0;
  for (const Logged& l : hub_.Log()) {
    if (absl::StartsWith(l.path, "/lfs/")) {
      ++cdn;
      EXPECT_TRUE(absl::StartsWith(l.host, "localhost")) << l.host;
      EXPECT_EQ(l.authorization, "") << l.path;
    } else {
      ++hub;
      EXPECT_EQ(l.authorization, "Bearer hf_secret") << l.path;
    }
  }
  EXPECT_EQ(cdn, 1);
  EXPECT_GT(hub, 0);
}

TEST_F(FetchTest, RevisionsWriteTheirRefButACommitDoesNot) {
  const std::string sha = hub_.AddRepo("org/st", StModel(), {"v1"});
  auto path = Fetch("org/st@v1");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(ReadFile(RepoDir("org/st") / "refs" / "v1"), sha);
  EXPECT_EQ(Tree(RepoDir("org/st") / "refs"), std::vector<std::string>{"v1"});
  auto pinned = Fetch("org/st@" + sha);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(*pinned, *path);
  EXPECT_EQ(Tree(RepoDir("org/st") / "refs"), std::vector<std::string>{"v1"});
}

TEST_F(FetchTest, FollowsAPaginatedTree) {
  auto files = StModel();
  hub_.AddRepo("org/st", files);
  Faults f;
  f.tree_page_size = 2;
  hub_.SetFaults(f);
  std::vector<std::pair<int64_t, int64_t>> calls;
  options_.progress = [&](int64_t d, int64_t t) { calls.emplace_back(d, t); };
  auto path = Fetch("org/st");
  ASSERT_TRUE(path.ok()) << path.status();
  std::vector<std::string> trees;
  for (const Logged& l : hub_.Log()) {
    if (absl::StrContains(l.path, "/tree/")) trees.push_back(l.path);
  }
  EXPECT_EQ(trees.size(), 4u);  // 7 files, 2 a page
  ASSERT_FALSE(calls.empty());
  // The total is over the files fetched after the selection (modules.json
  // was read for it).
  int64_t total = 0;
  for (const char* name : {"config.json", "tokenizer.json",
                           "1_Pooling/config.json", "model.safetensors"}) {
    total += static_cast<int64_t>(files[name].size());
  }
  EXPECT_EQ(calls.front().second, total);
}

TEST_F(FetchTest, OfflineUsesTheCacheOnly) {
  hub_.AddRepo("org/st", StModel());
  options_.offline = true;
  auto path = Fetch("org/st");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(
      absl::EndsWith(path.status().message(), "(HF_HUB_OFFLINE is set)"))
      << path.status();
  EXPECT_TRUE(hub_.Log().empty());

  options_.offline = false;
  auto online = Fetch("org/st");
  ASSERT_TRUE(online.ok()) << online.status();
  hub_.ClearLog();
  options_.offline = true;
  path = Fetch("org/st");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, *online);
  EXPECT_TRUE(hub_.Log().empty());
}

// A port nothing listens on: bound, never listening.
class DeadPort {
 public:
  DeadPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~DeadPort() { ::close(fd_); }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }

 private:
  int fd_;
  int port_ = 0;
};

TEST_F(FetchTest, ANetworkErrorFallsBackToTheCache) {
  DeadPort dead;
  options_.endpoint = dead.url();
  auto path = Fetch("org/st");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(path.status().message(), dead.url()))
      << path.status();
  EXPECT_TRUE(absl::StrContains(path.status().message(), "onnect"))
      << path.status();  // curl's "Couldn't connect to server"

  hub_.AddRepo("org/st", StModel());
  options_.endpoint = hub_.url();
  auto online = Fetch("org/st");
  ASSERT_TRUE(online.ok()) << online.status();
  options_.endpoint = dead.url();
  path = Fetch("org/st");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, *online);
}

TEST_F(FetchTest, FetchesOnlyTheChosenGgufAndAllPartsOfASplitOne) {
  std::map<std::string, std::string> files = {
      {"m-Q4_K_M.gguf", Bytes(3000, 3)},
      {"m-Q8_0-00001-of-00002.gguf", Bytes(2000, 4)},
      {"m-Q8_0-00002-of-00002.gguf", Bytes(2500, 5)},
      {"README.md", "gguf"}};
  const std::string sha = hub_.AddRepo("org/gguf", files);
  const fs::path snap = RepoDir("org/gguf") / "snapshots" / sha;
  auto path = Fetch("org/gguf:q4_k_m");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, (snap / "m-Q4_K_M.gguf").string());
  EXPECT_EQ(Tree(snap), std::vector<std::string>{"m-Q4_K_M.gguf"});
  EXPECT_EQ(
      ResolveInHfCache(options_.cache_dir, Ref("org/gguf:q4_k_m")).value_or(""),
      *path);

  path = Fetch("org/gguf:Q8_0");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, (snap / "m-Q8_0-00001-of-00002.gguf").string());
  EXPECT_EQ(Tree(snap), (std::vector<std::string>{
                            "m-Q4_K_M.gguf", "m-Q8_0-00001-of-00002.gguf",
                            "m-Q8_0-00002-of-00002.gguf"}));
  EXPECT_EQ(ReadFile(snap / "m-Q8_0-00002-of-00002.gguf"),
            files["m-Q8_0-00002-of-00002.gguf"]);

  path = Fetch("org/gguf");
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument);

  // Offline, the split set resolves to its first part too.
  options_.offline = true;
  path = Fetch("org/gguf:Q8_0");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, (snap / "m-Q8_0-00001-of-00002.gguf").string());
}

TEST_F(FetchTest, ACommitPinnedCachedFileNeedsNoNetwork) {
  const std::string sha =
      hub_.AddRepo("org/gguf", {{"m-Q4_0.gguf", Bytes(2000, 6)}});
  auto path = Fetch("org/gguf:Q4_0@" + sha);
  ASSERT_TRUE(path.ok()) << path.status();
  hub_.ClearLog();
  auto again = Fetch("org/gguf:Q4_0@" + sha);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *path);
  EXPECT_TRUE(hub_.Log().empty());
}

TEST_F(FetchTest, AFullDiskIsResourceExhaustedAndLeavesNoSnapshot) {
  auto files = StModel();
  hub_.AddRepo("org/st", files);
  const fs::path blobs = RepoDir("org/st") / "blobs";
  fs::create_directories(blobs);
  fs::create_symlink("/dev/full", blobs / (Sha256(files["model.safetensors"]) +
                                           ".incomplete"));
  auto path = Fetch("org/st");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kResourceExhausted)
      << path.status();
  EXPECT_TRUE(absl::StrContains(path.status().message(), "No space left"))
      << path.status();
  for (const std::string& s : Tree(RepoDir("org/st") / "snapshots")) {
    EXPECT_FALSE(absl::EndsWith(s, "model.safetensors")) << s;
  }
  EXPECT_FALSE(fs::exists(RepoDir("org/st") / "refs" / "main"));
}

TEST_F(FetchTest, TooLittleFreeSpaceFailsBeforeDownloading) {
  auto files = StModel();
  hub_.AddRepo("org/st", files);
  Faults f;
  f.advertised_size = {{"model.safetensors", int64_t{1} << 60}};  // 1 EiB
  hub_.SetFaults(f);
  auto path = Fetch("org/st");
  ASSERT_EQ(path.status().code(), absl::StatusCode::kResourceExhausted)
      << path.status();
  EXPECT_TRUE(absl::StrContains(path.status().message(),
                                "free space or set HF_HUB_CACHE"))
      << path.status();
  EXPECT_TRUE(absl::StrContains(path.status().message(), "1.0 EiB"))
      << path.status();
  for (const Logged& l : hub_.FileGets()) {
    EXPECT_TRUE(absl::EndsWith(l.path, "modules.json")) << l.path;
  }
}

TEST_F(FetchTest, ProgressIsMonotoneAndEndsAtTheTotal) {
  auto files = StModel();
  files["model.safetensors"] = Bytes(3 << 20, 7);
  hub_.AddRepo("org/st", files);
  std::vector<std::pair<int64_t, int64_t>> calls;
  options_.progress = [&](int64_t d, int64_t t) { calls.emplace_back(d, t); };
  auto path = Fetch("org/st");
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_GE(calls.size(), 2u);
  int64_t total = 0;
  for (const char* name : {"config.json", "tokenizer.json",
                           "1_Pooling/config.json", "model.safetensors"}) {
    total += static_cast<int64_t>(files[name].size());
  }  // modules.json was fetched for the selection, before the totals
  EXPECT_EQ(calls.front(), std::make_pair(int64_t{0}, total));
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GE(calls[i].first, calls[i - 1].first);
    EXPECT_EQ(calls[i].second, total);
  }
  EXPECT_EQ(calls.back(), std::make_pair(total, total));

  // Nothing left to fetch: a zero total.
  calls.clear();
  ASSERT_TRUE(Fetch("org/st").ok());
  EXPECT_EQ(calls.front(), std::make_pair(int64_t{0}, int64_t{0}));
  EXPECT_EQ(calls.back(), std::make_pair(int64_t{0}, int64_t{0}));
}

TEST_F(FetchTest, CancelStopsAndKeepsThePartialDownloadForAResume) {
  auto files = StModel();
  hub_.AddRepo("org/st", files);
  Faults f;
  f.hold_after = 30000;  // then the body stalls until Release()
  hub_.SetFaults(f);
  std::atomic<bool> cancel{false};
  options_.cancel = &cancel;
  // Past the small files (fetched first, sorted) and into the weights.
  options_.progress = [&](int64_t done, int64_t) {
    if (done > 1000) cancel = true;
  };
  auto path = Fetch("org/st");
  hub_.Release();
  ASSERT_EQ(path.status().code(), absl::StatusCode::kCancelled)
      << path.status();
  const std::string etag = Sha256(files["model.safetensors"]);
  const fs::path part = RepoDir("org/st") / "blobs" / (etag + ".incomplete");
  ASSERT_TRUE(fs::exists(part));
  const uintmax_t kept = fs::file_size(part);
  EXPECT_GT(kept, 1000u - 200u);
  EXPECT_LE(kept, 30000u);
  EXPECT_FALSE(fs::exists(RepoDir("org/st") / "refs" / "main"));

  cancel = false;
  options_.progress = nullptr;
  hub_.ClearLog();
  path = Fetch("org/st");
  ASSERT_TRUE(path.ok()) << path.status();
  bool resumed = false;
  for (const Logged& l : hub_.FileGets()) {
    resumed |= l.range == absl::StrCat("bytes=", kept, "-");
  }
  EXPECT_TRUE(resumed);
  EXPECT_EQ(ReadFile(fs::path(*path) / "model.safetensors"),
            files["model.safetensors"]);
  EXPECT_FALSE(fs::exists(part));
}

TEST_F(FetchTest, CancelledBeforeTheStartFetchesNothing) {
  hub_.AddRepo("org/st", StModel());
  std::atomic<bool> cancel{true};
  options_.cancel = &cancel;
  auto path = Fetch("org/st");
  EXPECT_EQ(path.status().code(), absl::StatusCode::kCancelled)
      << path.status();
  EXPECT_TRUE(hub_.FileGets().empty());
}

TEST_F(FetchTest, ConcurrentFetchesOfOneRepoShareItsBlobs) {
  auto files = StModel();
  files["model.safetensors"] = Bytes(2 << 20, 8);
  hub_.AddRepo("org/st", files);
  absl::StatusOr<std::string> results[4];
  std::vector<std::thread> threads;
  for (auto& r : results) {
    threads.emplace_back([&r, this] { r = Fetch("org/st"); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, *results[0]);
  }
  EXPECT_EQ(ReadFile(fs::path(*results[0]) / "model.safetensors"),
            files["model.safetensors"]);
  for (const std::string& b : Tree(RepoDir("org/st") / "blobs")) {
    EXPECT_FALSE(absl::StrContains(b, ".incomplete")) << b;
  }
}

TEST(HubFetchOptionsTest, FromTheEnvironment) {
  const char* kVars[] = {
      "HF_ENDPOINT",    "HF_TOKEN",     "HUGGING_FACE_HUB_TOKEN",
      "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN_PATH"};
  std::map<std::string, std::optional<std::string>> saved;
  for (const char* v : kVars) {
    const char* old = std::getenv(v);
    saved[v] = old == nullptr ? std::nullopt : std::optional<std::string>(old);
  }
  const fs::path dir =
      fs::temp_directory_path() / absl::StrCat("inferd-hf-env-", ::getpid());
  fs::create_directories(dir);
  { std::ofstream(dir / "token") << "hf_from_file\n"; }
  ::setenv("HF_ENDPOINT", "http://mirror.example:8080//", 1);
  ::unsetenv("HF_TOKEN");
  ::setenv("HUGGING_FACE_HUB_TOKEN", "hf_old_name", 1);
  ::setenv("HF_HUB_OFFLINE", "True", 1);
  ::setenv("HF_HUB_CACHE", (dir / "cache").c_str(), 1);
  HubFetchOptions o = HubFetchOptionsFromEnv();
  EXPECT_EQ(o.endpoint, "http://mirror.example:8080");
  EXPECT_EQ(o.token, "hf_old_name");
  EXPECT_TRUE(o.offline);
  EXPECT_EQ(o.cache_dir, (dir / "cache").string());

  ::setenv("HF_TOKEN", "hf_new", 1);
  ::setenv("HF_HUB_OFFLINE", "0", 1);
  ::unsetenv("HF_ENDPOINT");
  o = HubFetchOptionsFromEnv();
  EXPECT_EQ(o.token, "hf_new");
  EXPECT_FALSE(o.offline);
  EXPECT_EQ(o.endpoint, "https://huggingface.co");

  ::unsetenv("HF_TOKEN");
  ::unsetenv("HUGGING_FACE_HUB_TOKEN");
  ::setenv("HF_TOKEN_PATH", (dir / "token").c_str(), 1);
  EXPECT_EQ(HubFetchOptionsFromEnv().token, "hf_from_file");

  for (const auto& [name, value] : saved) {
    if (value.has_value()) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace inferd
