#include "runtime/loader/hf_download.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kDefaultEndpoint[] = "https://huggingface.co";
constexpr char kUserAgent[] = "inferd/0.1";
constexpr int kMaxAttempts = 5;  // per file, transient failures
constexpr int kMaxRedirects = 10;
constexpr long kConnectTimeoutMs = 10000;  // NOLINT(runtime/int): curl's type
constexpr long kLowSpeedSeconds = 60;      // NOLINT(runtime/int)
constexpr size_t kApiBodyCap = size_t{64} << 20;
constexpr size_t kErrorBodyCap = size_t{64} << 10;
constexpr size_t kSelectionFileCap = size_t{64} << 20;
constexpr auto kProgressInterval = std::chrono::milliseconds(100);

// ----------------------------------------------------------------------------
// Small helpers.

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

bool IsHex(absl::string_view s) {
  for (char c : s) {
    if (!absl::ascii_isxdigit(c)) return false;
  }
  return !s.empty();
}

bool IsCommitHash(absl::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r: returns the message, not necessarily in `buf`.
  return strerror_r(err, buf, sizeof(buf));
}

// A path inside a repo that is safe to create under a snapshot directory.
bool SafeRepoPath(absl::string_view p) {
  if (p.empty() || p.size() > 1024 || p.front() == '/') return false;
  for (absl::string_view seg : absl::StrSplit(p, '/')) {
    if (seg.empty() || seg == "." || seg == "..") return false;
  }
  for (char c : p) {
    if (c == '\\' || c == '\0' || c == '\n' || c == '\r') return false;
  }
  return true;
}

// A revision name usable as a file name under refs/.
bool SafeRevision(absl::string_view r) {
  if (r.empty() || r.size() > 256 || r.front() == '/') return false;
  for (absl::string_view seg : absl::StrSplit(r, '/')) {
    if (seg.empty() || seg == "." || seg == "..") return false;
  }
  return true;
}

// Percent-encodes everything but RFC 3986 unreserved characters (and '/'
// when `keep_slash`).
std::string PercentEncode(absl::string_view s, bool keep_slash) {
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ||
        c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

std::string HumanBytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrCat(n, " B");
  return absl::StrFormat("%.1f %s", v, units[u]);
}

std::string RepoFolder(absl::string_view repo) {
  return absl::StrCat("models--", absl::StrReplaceAll(repo, {{"/", "--"}}));
}

// The blob name an ETag header gives: without a weak-validator prefix and
// without quotes.
std::string CleanEtag(absl::string_view v) {
  v = absl::StripAsciiWhitespace(v);
  absl::ConsumePrefix(&v, "W/");
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    v = v.substr(1, v.size() - 2);
  }
  return std::string(v);
}

bool SafeEtag(absl::string_view e) {
  if (e.empty() || e.size() > 128) return false;
  for (char c : e) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

// A split GGUF part: "<stem>-00002-of-00005.gguf".
struct SplitGguf {
  std::string stem;  // with any directory prefix
  int part = 0;
  int count = 0;
  size_t part_width = 0;
  std::string count_text;
  std::string ext;  // ".gguf" as spelled
};

std::optional<SplitGguf> ParseSplitGguf(absl::string_view name) {
  if (!absl::EndsWithIgnoreCase(name, ".gguf")) return std::nullopt;
  SplitGguf s;
  s.ext = std::string(name.substr(name.size() - 5));
  absl::string_view base = name.substr(0, name.size() - 5);
  const size_t of = base.rfind("-of-");
  if (of == absl::string_view::npos) return std::nullopt;
  absl::string_view count = base.substr(of + 4);
  absl::string_view before = base.substr(0, of);
  const size_t dash = before.rfind('-');
  if (dash == absl::string_view::npos) return std::nullopt;
  absl::string_view part = before.substr(dash + 1);
  auto digits = [](absl::string_view d) {
    if (d.empty() || d.size() > 5) return false;
    for (char c : d) {
      if (!absl::ascii_isdigit(c)) return false;
    }
    return true;
  };
  if (!digits(count) || !digits(part)) return std::nullopt;
  if (!absl::SimpleAtoi(count, &s.count) || !absl::SimpleAtoi(part, &s.part) ||
      s.part < 1 || s.part > s.count) {
    return std::nullopt;
  }
  s.stem = std::string(before.substr(0, dash));
  s.part_width = part.size();
  s.count_text = std::string(count);
  return s;
}

std::string SplitPartName(const SplitGguf& s, int part) {
  std::string n = std::to_string(part);
  if (n.size() < s.part_width) n.insert(0, s.part_width - n.size(), '0');
  return absl::StrCat(s.stem, "-", n, "-of-", s.count_text, s.ext);
}

// ----------------------------------------------------------------------------
// Digests (OpenSSL EVP).

class Digest {
 public:
  explicit Digest(const EVP_MD* md) : md_(md), ctx_(EVP_MD_CTX_new()) {
    Reset();
  }
  ~Digest() { EVP_MD_CTX_free(ctx_); }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void Reset() { EVP_DigestInit_ex(ctx_, md_, nullptr); }
  void Update(const void* data, size_t n) { EVP_DigestUpdate(ctx_, data, n); }
  std::string Hex() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, out, &n);
    std::string hex;
    for (unsigned int i = 0; i < n; ++i)
      absl::StrAppendFormat(&hex, "%02x", out[i]);
    return hex;
  }

 private:
  const EVP_MD* md_;
  EVP_MD_CTX* ctx_;
};

// Feeds bytes [0, n) of `fd` to `d`; false on a read error or a short file.
bool HashPrefix(int fd, int64_t n, Digest& d) {
  std::vector<char> buf(1 << 20);
  int64_t off = 0;
  while (off < n) {
    const size_t want =
        static_cast<size_t>(std::min<int64_t>(n - off, buf.size()));
    const ssize_t got = ::pread(fd, buf.data(), want, off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    d.Update(buf.data(), static_cast<size_t>(got));
    off += got;
  }
  return true;
}

// ----------------------------------------------------------------------------
// Files.

absl::Status FileError(int err, absl::string_view what, absl::string_view path,
                       absl::string_view cache_dir) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", ErrnoText(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(absl::StrCat(
          msg, " (free space on ", cache_dir, " or set HF_HUB_CACHE)"));
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(
          absl::StrCat(msg, " (set HF_HUB_CACHE to a writable directory)"));
    default:
      return absl::InternalError(msg);
  }
}

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsRegular(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Size of a regular file `path` (following links), 0 otherwise.
int64_t RegularSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return st.st_size;
}

absl::StatusOr<std::string> ReadCapped(const std::string& path, size_t cap) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string out;
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    out.append(buf, static_cast<size_t>(in.gcount()));
    if (out.size() > cap) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path, " is larger than ", HumanBytes(cap)));
    }
  }
  return out;
}

absl::Status MakeDirs(const std::string& dir, const std::string& cache_dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec && !fs::is_directory(dir)) {
    return FileError(ec.value(), "cannot create", dir, cache_dir);
  }
  return absl::OkStatus();
}

// A name for a temporary next to `path`, unique across threads and
// processes.
std::string TempName(const std::string& path) {
  return absl::StrCat(path, ".tmp-", ::getpid(), "-",
                      std::hash<std::thread::id>()(std::this_thread::get_id()));
}

// ----------------------------------------------------------------------------
// URLs (libcurl's URL API).

struct Url {
  std::string scheme, host, port;
};

std::optional<Url> ParseUrl(const std::string& url) {
  CURLU* u = curl_url();
  if (u == nullptr) return std::nullopt;
  std::optional<Url> out;
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK) {
    char* scheme = nullptr;
    char* host = nullptr;
    char* port = nullptr;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) ==
            CURLUE_OK) {
      out =
          Url{absl::AsciiStrToLower(scheme), absl::AsciiStrToLower(host), port};
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
  }
  curl_url_cleanup(u);
  return out;
}

// `ref` (absolute or relative, as in a Location header) against `base`.
std::optional<std::string> ResolveUrl(const std::string& base,
                                      const std::string& ref) {
  CURLU* u = curl_url();
  if (u == nullptr) return std::nullopt;
  std::optional<std::string> out;
  char* full = nullptr;
  if (curl_url_set(u, CURLUPART_URL, base.c_str(), 0) == CURLUE_OK &&
      curl_url_set(u, CURLUPART_URL, ref.c_str(), 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_URL, &full, 0) == CURLUE_OK) {
    out = std::string(full);
  }
  curl_free(full);
  curl_url_cleanup(u);
  return out;
}

bool IsRelativeUrl(absl::string_view location) {
  return !absl::StrContains(location, "://") &&
         !absl::StartsWith(location, "//");
}

// The target of a `Link: <url>; rel="next"` header, or "".
std::string NextLink(absl::string_view link) {
  for (absl::string_view part : absl::StrSplit(link, ',')) {
    const size_t open = part.find('<');
    const size_t close = part.find('>');
    if (open == absl::string_view::npos || close == absl::string_view::npos ||
        close < open) {
      continue;
    }
    std::string params = absl::AsciiStrToLower(part.substr(close + 1));
    params = absl::StrReplaceAll(params, {{" ", ""}, {"\"", ""}});
    if (absl::StrContains(params, ";rel=next")) {
      return std::string(part.substr(open + 1, close - open - 1));
    }
  }
  return "";
}

// ----------------------------------------------------------------------------
// Progress: the totals first, then at most every kProgressInterval (also
// while a transfer stalls, so the last bytes are not held back), then the
// end.

class Progress {
 public:
  explicit Progress(const std::function<void(int64_t, int64_t)>& callback)
      : callback_(callback) {}

  void Start(int64_t done, int64_t total) {
    active_ = true;
    done_ = done;
    total_ = total;
    Report(true);
  }
  void Add(int64_t n) {
    if (!active_ || n <= 0) return;
    done_ += n;
    Report(false);
  }
  // From libcurl's progress callback: reports what Add held back.
  void Tick() {
    if (active_ && done_ != reported_) Report(false);
  }
  void Finish() {
    if (active_) Report(true);
  }

 private:
  void Report(bool force) {
    if (!callback_) return;
    const Clock::time_point now = Clock::now();
    if (!force && now - last_ < kProgressInterval) return;
    last_ = now;
    total_ = std::max(total_, done_);  // a size the Hub did not announce
    reported_ = done_;
    callback_(done_, total_);
  }

  const std::function<void(int64_t, int64_t)>& callback_;
  bool active_ = false;
  int64_t done_ = 0;
  int64_t reported_ = -1;
  int64_t total_ = 0;
  Clock::time_point last_;
};

// ----------------------------------------------------------------------------
// HTTP over one libcurl easy handle (connections are reused across calls).

struct HttpResult {
  CURLcode code = CURLE_OK;
  std::string curl_error;  // curl's own text when code != CURLE_OK
  long status = 0;         // NOLINT(runtime/int): curl's type
  std::vector<std::pair<std::string, std::string>> headers;  // names lower
  std::string body;  // the body, unless a sink took it
  bool body_too_large = false;

  std::string Header(absl::string_view name) const {
    for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
      if (it->first == name) return it->second;
    }
    return "";
  }
  bool HasHeader(absl::string_view name) const {
    for (const auto& h : headers) {
      if (h.first == name) return true;
    }
    return false;
  }
  bool Success() const { return status >= 200 && status < 300; }
  bool Redirect() const { return status >= 300 && status < 400; }
};

// Receives the body of a 2xx answer; false stops the transfer.
using BodySink =
    std::function<bool(const HttpResult& head, const char* data, size_t n)>;

class HttpClient {
 public:
  HttpClient(const HubFetchOptions& options, Progress* progress)
      : options_(options),
        progress_(progress),
        curl_(curl_easy_init()),
        endpoint_(ParseUrl(options.endpoint)),
        user_agent_(absl::StrCat(kUserAgent, " libcurl/",
                                 curl_version_info(CURLVERSION_NOW)->version)) {
  }
  ~HttpClient() {
    if (curl_ != nullptr) curl_easy_cleanup(curl_);
  }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  bool ok() const { return curl_ != nullptr && endpoint_.has_value(); }

  bool Cancelled() const {
    return options_.cancel != nullptr && options_.cancel->load();
  }

  // One request; redirects are not followed. The token goes only to the
  // endpoint's origin (a CDN on another host gets no Authorization).
  // `range_from` > 0 asks for the bytes from there on. `sink` (GET) takes
  // the body of a 2xx answer; other bodies land in HttpResult::body.
  HttpResult Send(const char* method, const std::string& url,
                  int64_t range_from, const BodySink* sink) {
    HttpResult result;
    Call call{this, &result, sink,
              sink != nullptr ? kErrorBodyCap : kApiBodyCap};
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_slist* headers = nullptr;
    std::string auth;
    const std::optional<Url> target = ParseUrl(url);
    if (!options_.token.empty() && target.has_value() &&
        target->scheme == endpoint_->scheme &&
        target->host == endpoint_->host && target->port == endpoint_->port) {
      auth = absl::StrCat("Authorization: Bearer ", options_.token);
      headers = curl_slist_append(headers, auth.c_str());
    }
    std::string range;
    if (range_from > 0) {
      range = absl::StrCat("Range: bytes=", range_from, "-");
      headers = curl_slist_append(headers, range.c_str());
    }
    CURL* c = curl_;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, kLowSpeedSeconds);
    curl_easy_setopt(c, CURLOPT_USERAGENT, user_agent_.c_str());
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &HttpClient::OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &call);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &HttpClient::OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &call);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &HttpClient::OnProgress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &call);
    if (std::strcmp(method, "HEAD") == 0) {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    }
    result.code = curl_easy_perform(c);
    long status = 0;  // NOLINT(runtime/int)
    if (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
        status != 0) {
      result.status = status;
    }
    if (result.code != CURLE_OK) {
      result.curl_error = errbuf[0] != '\0' ? std::string(errbuf)
                                            : curl_easy_strerror(result.code);
      result.curl_error =
          std::string(absl::StripTrailingAsciiWhitespace(result.curl_error));
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
    curl_slist_free_all(headers);
    return result;
  }

 private:
  struct Call {
    HttpClient* client;
    HttpResult* result;
    const BodySink* sink;
    size_t cap;
  };

  static size_t OnHeader(char* data, size_t size, size_t n, void* p) {
    Call* call = static_cast<Call*>(p);
    absl::string_view line(data, size * n);
    line = absl::StripTrailingAsciiWhitespace(line);
    if (absl::StartsWith(line, "HTTP/")) {  // a new answer starts
      call->result->headers.clear();
      std::vector<absl::string_view> parts =
          absl::StrSplit(line, absl::MaxSplits(' ', 2));
      int status = 0;
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &status)) {
        call->result->status = status;
      }
    } else if (const size_t colon = line.find(':');
               colon != absl::string_view::npos) {
      call->result->headers.emplace_back(
          absl::AsciiStrToLower(line.substr(0, colon)),
          std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
    }
    return size * n;
  }

  static size_t OnBody(char* data, size_t size, size_t n, void* p) {
    Call* call = static_cast<Call*>(p);
    const size_t len = size * n;
    HttpResult& r = *call->result;
    if (call->sink != nullptr && r.Success()) {
      return (*call->sink)(r, data, len) ? len : CURL_WRITEFUNC_ERROR;
    }
    if (r.body.size() + len > call->cap) {
      r.body_too_large = true;
      return CURL_WRITEFUNC_ERROR;
    }
    r.body.append(data, len);
    return len;
  }

  static int OnProgress(void* p, curl_off_t, curl_off_t, curl_off_t,
                        curl_off_t) {
    HttpClient* client = static_cast<Call*>(p)->client;
    client->progress_->Tick();
    return client->Cancelled() ? 1 : 0;
  }

  const HubFetchOptions& options_;
  Progress* const progress_;
  CURL* const curl_;
  const std::optional<Url> endpoint_;
  const std::string user_agent_;
};

// ----------------------------------------------------------------------------
// The Hub.

struct TreeEntry {
  int64_t size = -1;
  std::string oid;      // git blob sha1
  std::string lfs_oid;  // sha256, LFS files only
};

struct FileMeta {
  std::string path;  // in the repo
  std::string etag;  // blob name
  int64_t size = -1;
  bool lfs = false;
  std::string resolve_url;  // {endpoint}/{repo}/resolve/{commit}/{path}
  std::string url;          // where the HEAD sent us (the CDN for LFS files)
  std::string sha256;       // expected, when known
  std::string git_sha1;     // expected, when known
};

// Blocks until this process holds the per-blob lock huggingface_hub also
// takes (<cache>/.locks/models--org--repo/<etag>.lock, flock), or the fetch
// is cancelled.
class BlobLock {
 public:
  ~BlobLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  absl::Status Acquire(const std::string& path, const std::string& cache_dir,
                       const HttpClient& client) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) return FileError(errno, "cannot open lock", path, cache_dir);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        return FileError(errno, "cannot lock", path, cache_dir);
      }
      if (client.Cancelled()) {
        return absl::CancelledError(
            absl::StrCat("cancelled while waiting for ", path));
      }
      // Another thread or process downloads this blob; huggingface_hub's
      // filelock polls the same way.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return absl::OkStatus();
  }

 private:
  int fd_ = -1;
};

class Fetcher {
 public:
  Fetcher(const HubModelRef& ref, const HubFetchOptions& options)
      : ref_(ref),
        options_(options),
        progress_(options.progress),
        client_(options, &progress_),
        repo_dir_(absl::StrCat(options.cache_dir, "/", RepoFolder(ref.repo))),
        lock_dir_(absl::StrCat(options.cache_dir, "/.locks/",
                               RepoFolder(ref.repo))) {}

  absl::StatusOr<std::string> Run();

 private:
  struct Attempt {
    absl::Status status;
    bool retry = false;
  };

  absl::Status Cancelled(absl::string_view what) const {
    return absl::CancelledError(
        absl::StrCat("fetching ", ref_.repo, " was cancelled (", what,
                     "); a partial download resumes on the next fetch"));
  }
  std::string ApiUrl(absl::string_view tail) const {
    return absl::StrCat(options_.endpoint, "/api/models/", ref_.repo, "/",
                        tail);
  }
  std::string BlobPath(const std::string& etag) const {
    return absl::StrCat(repo_dir_, "/blobs/", etag);
  }
  std::string SnapshotDir() const {
    return absl::StrCat(repo_dir_, "/snapshots/", commit_);
  }

  absl::Status HttpError(const char* method, const std::string& url,
                         const HttpResult& r, const std::string& file) const;
  absl::Status Backoff(int attempt) const;
  absl::StatusOr<std::string> CacheFallback(const absl::Status& error) const;

  absl::Status GetRevision();
  absl::Status GetTree();
  absl::StatusOr<FileMeta> Head(const std::string& path);
  absl::Status EnsureBlob(const FileMeta& m);
  absl::Status DownloadBlob(const FileMeta& m);
  Attempt DownloadAttempt(const FileMeta& m, const std::string& part,
                          int attempt);
  absl::Status Link(const std::string& path, const std::string& etag);
  absl::Status WriteRef();
  absl::Status EnsureFile(const std::string& path);
  absl::Status CheckFreeSpace(int64_t needed) const;

  const HubModelRef& ref_;
  const HubFetchOptions& options_;
  Progress progress_;
  HttpClient client_;
  const std::string repo_dir_;
  const std::string lock_dir_;
  std::string commit_;
  std::vector<std::string> files_;
  std::map<std::string, TreeEntry> tree_;
  std::map<std::string, FileMeta> metas_;
};

absl::Status Fetcher::HttpError(const char* method, const std::string& url,
                                const HttpResult& r,
                                const std::string& file) const {
  if (r.code != CURLE_OK && r.status == 0) {
    return absl::UnavailableError(absl::StrCat(
        method, " ", url, ": ", r.curl_error,
        " (check the network and HF_ENDPOINT; HF_HUB_OFFLINE=1 uses the cache "
        "only)"));
  }
  const std::string code = r.Header("x-error-code");
  std::string detail = r.Header("x-error-message");
  if (detail.empty() && !r.body.empty()) {
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_object()) {
      auto it = j.find("error");
      if (it != j.end() && it->is_string()) detail = it->get<std::string>();
    }
  }
  if (detail.size() > 300) detail = absl::StrCat(detail.substr(0, 300), "...");
  std::string head = absl::StrCat(method, " ", url, ": HTTP ", r.status);
  if (!code.empty() && !detail.empty()) {
    absl::StrAppend(&head, " (", code, ": ", detail, ")");
  } else if (!code.empty() || !detail.empty()) {
    absl::StrAppend(&head, " (", code, detail, ")");
  }
  const bool has_token = !options_.token.empty();
  const std::string repo_page = absl::StrCat(options_.endpoint, "/", ref_.repo);
  if (code == "RepositoryNotFound" ||
      (r.status == 404 && file.empty() && code != "RevisionNotFound" &&
       code != "EntryNotFound")) {
    return absl::NotFoundError(
        absl::StrCat(head, ": no repo ", ref_.repo, " at ", options_.endpoint,
                     " (check the name; a private repo needs HF_TOKEN",
                     has_token ? " with access to it" : "", ")"));
  }
  if (code == "RevisionNotFound") {
    return absl::NotFoundError(
        absl::StrCat(head, ": ", ref_.repo, " has no revision '", ref_.revision,
                     "' (check the branch, tag or commit on ", repo_page, ")"));
  }
  if (code == "EntryNotFound" || r.status == 404) {
    return absl::NotFoundError(
        absl::StrCat(head, ": ", ref_.repo, " has no file '", file,
                     "' at revision ", ref_.revision,
                     commit_.empty() ? "" : absl::StrCat(" (", commit_, ")")));
  }
  if (code == "GatedRepo" || r.status == 401 || r.status == 403) {
    if (!has_token) {
      return absl::PermissionDeniedError(absl::StrCat(
          head, ": gated or private repo: accept its terms on the Hub (",
          repo_page, ") and set HF_TOKEN to a token of that account"));
    }
    if (r.status == 401 && code != "GatedRepo") {
      return absl::PermissionDeniedError(absl::StrCat(
          head, ": HF_TOKEN is not accepted (check it, or create one at ",
          options_.endpoint, "/settings/tokens)"));
    }
    return absl::PermissionDeniedError(absl::StrCat(
        head, ": HF_TOKEN has no access to ", ref_.repo,
        ": accept its terms on the Hub (", repo_page,
        ") with the token's account, or use a token with read access"));
  }
  if (r.status == 429) {
    return absl::UnavailableError(absl::StrCat(
        head,
        ": rate-limited by the Hub; retry later (HF_TOKEN raises the "
        "limit)"));
  }
  if (r.status >= 500) {
    return absl::UnavailableError(
        absl::StrCat(head, ": the Hub failed; retry later"));
  }
  if (r.body_too_large) {
    return absl::UnavailableError(absl::StrCat(
        head, ": the answer is larger than ", HumanBytes(kApiBodyCap)));
  }
  if (r.code != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(head, ": ", r.curl_error));
  }
  return absl::UnknownError(absl::StrCat(head, ": unexpected answer"));
}

absl::Status Fetcher::Backoff(int attempt) const {
  // 100 ms, 200 ms, 400 ms, ... in slices so that a cancel is seen soon.
  const Clock::time_point until =
      Clock::now() + std::chrono::milliseconds(100 << (attempt - 2));
  while (Clock::now() < until) {
    if (client_.Cancelled()) return Cancelled("between retries");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveCached(const std::string& cache_dir,
                                          const HubModelRef& ref);

absl::StatusOr<std::string> Fetcher::CacheFallback(
    const absl::Status& error) const {
  if (!absl::IsUnavailable(error)) return error;
  absl::StatusOr<std::string> cached = ResolveCached(options_.cache_dir, ref_);
  if (cached.ok()) return cached;
  return absl::Status(error.code(),
                      absl::StrCat(error.message(), "; and no cached copy in ",
                                   options_.cache_dir));
}

absl::Status Fetcher::GetRevision() {
  const std::string url =
      ApiUrl(absl::StrCat("revision/", PercentEncode(ref_.revision, false)));
  HttpResult r = client_.Send("GET", url, 0, nullptr);
  if (client_.Cancelled()) return Cancelled("revision lookup");
  if (r.code != CURLE_OK || r.status != 200) {
    return HttpError("GET", url, r, "");
  }
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  auto bad = [&](absl::string_view why) {
    return absl::UnavailableError(
        absl::StrCat("GET ", url, ": unexpected answer from the Hub (", why,
                     "); check HF_ENDPOINT"));
  };
  if (!j.is_object()) return bad("not a JSON object");
  auto sha = j.find("sha");
  if (sha == j.end() || !sha->is_string() ||
      !IsCommitHash(sha->get_ref<const std::string&>())) {
    return bad("no commit \"sha\"");
  }
  commit_ = sha->get<std::string>();
  auto siblings = j.find("siblings");
  if (siblings != j.end() && siblings->is_array()) {
    for (const nlohmann::json& s : *siblings) {
      if (!s.is_object()) continue;
      auto name = s.find("rfilename");
      if (name != s.end() && name->is_string() &&
          SafeRepoPath(name->get_ref<const std::string&>())) {
        files_.push_back(name->get<std::string>());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Fetcher::GetTree() {
  std::string url = ApiUrl(absl::StrCat("tree/", commit_, "?recursive=true"));
  for (int page = 0; !url.empty(); ++page) {
    if (page > 100000) break;
    HttpResult r = client_.Send("GET", url, 0, nullptr);
    if (client_.Cancelled()) return Cancelled("file listing");
    if (r.code == CURLE_OK && r.status == 404 && page == 0 &&
        r.Header("x-error-code").empty()) {
      // A mirror without the tree API: the HEADs give the sizes.
      break;
    }
    if (r.code != CURLE_OK || r.status != 200) {
      return HttpError("GET", url, r, "");
    }
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (!j.is_array()) {
      return absl::UnavailableError(absl::StrCat(
          "GET ", url, ": unexpected answer from the Hub (not a JSON array)"));
    }
    for (const nlohmann::json& e : j) {
      if (!e.is_object()) continue;
      auto type = e.find("type");
      auto path = e.find("path");
      if (type == e.end() || !type->is_string() || *type != "file" ||
          path == e.end() || !path->is_string()) {
        continue;
      }
      TreeEntry t;
      auto size = e.find("size");
      if (size != e.end() && size->is_number_integer()) {
        t.size = size->get<int64_t>();
      }
      auto oid = e.find("oid");
      if (oid != e.end() && oid->is_string()) t.oid = oid->get<std::string>();
      auto lfs = e.find("lfs");
      if (lfs != e.end() && lfs->is_object()) {
        auto lo = lfs->find("oid");
        if (lo != lfs->end() && lo->is_string()) {
          t.lfs_oid = lo->get<std::string>();
        }
      }
      tree_[path->get<std::string>()] = std::move(t);
    }
    const std::string next = NextLink(r.Header("link"));
    if (next.empty()) break;
    std::optional<std::string> resolved = ResolveUrl(url, next);
    if (!resolved.has_value()) {
      return absl::UnavailableError(absl::StrCat(
          "GET ", url, ": unusable Link header '", r.Header("link"), "'"));
    }
    url = *resolved;
  }
  if (files_.empty()) {
    for (const auto& [path, entry] : tree_) {
      if (SafeRepoPath(path)) files_.push_back(path);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<FileMeta> Fetcher::Head(const std::string& path) {
  if (auto it = metas_.find(path); it != metas_.end()) return it->second;
  const std::string resolve_url =
      absl::StrCat(options_.endpoint, "/", ref_.repo, "/resolve/", commit_, "/",
                   PercentEncode(path, true));
  std::string url = resolve_url;
  HttpResult r;
  for (int attempt = 1, hops = 0;;) {
    if (client_.Cancelled()) return Cancelled("file metadata");
    r = client_.Send("HEAD", url, 0, nullptr);
    if (client_.Cancelled()) return Cancelled("file metadata");
    const std::string location = r.Header("location");
    // The Hub answers a renamed repo with a redirect to a path on itself
    // (no file headers yet); a redirect carrying the file's headers points
    // at the CDN and is the answer.
    if (r.code == CURLE_OK && r.Redirect() && !location.empty() &&
        IsRelativeUrl(location) && !r.HasHeader("x-linked-etag") &&
        ++hops <= kMaxRedirects) {
      std::optional<std::string> next = ResolveUrl(url, location);
      if (next.has_value()) {
        url = *next;
        continue;
      }
    }
    const bool transient = (r.code != CURLE_OK && r.status == 0) ||
                           r.status >= 500 || r.status == 429;
    if (!transient || attempt >= kMaxAttempts) break;
    RETURN_IF_ERROR(Backoff(++attempt));
  }
  if (r.code != CURLE_OK || (!r.Success() && !r.Redirect())) {
    return HttpError("HEAD", url, r, path);
  }
  FileMeta m;
  m.path = path;
  m.resolve_url = resolve_url;
  const std::string linked = r.Header("x-linked-etag");
  m.etag = CleanEtag(linked.empty() ? r.Header("etag") : linked);
  const TreeEntry* t = nullptr;
  if (auto it = tree_.find(path); it != tree_.end()) t = &it->second;
  m.lfs = !linked.empty() || (t != nullptr && !t->lfs_oid.empty());
  int64_t size = -1;
  if (absl::SimpleAtoi(r.Header("x-linked-size"), &size)) {
    m.size = size;
  } else if (t != nullptr && t->size >= 0) {
    m.size = t->size;
  } else if (r.Success() &&
             absl::SimpleAtoi(r.Header("content-length"), &size)) {
    m.size = size;
  }
  if (!SafeEtag(m.etag)) {
    return absl::UnavailableError(absl::StrCat(
        "HEAD ", url, ": no usable ETag for ", path, " ('", m.etag,
        "'); a proxy between inferd and ", options_.endpoint, " may strip it"));
  }
  if (r.Redirect()) {
    std::optional<std::string> next = ResolveUrl(url, r.Header("location"));
    if (!next.has_value()) {
      return absl::UnavailableError(
          absl::StrCat("HEAD ", url, ": redirect without a usable Location"));
    }
    m.url = *next;
  } else {
    m.url = url;
  }
  if (m.lfs && m.etag.size() == 64 && IsHex(m.etag)) {
    m.sha256 = absl::AsciiStrToLower(m.etag);
  } else if (!m.lfs && IsCommitHash(m.etag) && t != nullptr &&
             t->oid == m.etag) {
    m.git_sha1 = m.etag;
  }
  metas_[path] = m;
  return m;
}

absl::Status Fetcher::EnsureBlob(const FileMeta& m) {
  const std::string blob = BlobPath(m.etag);
  if (Exists(blob)) return absl::OkStatus();
  RETURN_IF_ERROR(
      MakeDirs(absl::StrCat(repo_dir_, "/blobs"), options_.cache_dir));
  RETURN_IF_ERROR(MakeDirs(lock_dir_, options_.cache_dir));
  BlobLock lock;
  RETURN_IF_ERROR(lock.Acquire(absl::StrCat(lock_dir_, "/", m.etag, ".lock"),
                               options_.cache_dir, client_));
  if (Exists(blob)) return absl::OkStatus();  // the lock holder fetched it
  return DownloadBlob(m);
}

absl::Status Fetcher::DownloadBlob(const FileMeta& m) {
  const std::string part = absl::StrCat(BlobPath(m.etag), ".incomplete");
  Attempt a;
  for (int attempt = 1; attempt <= kMaxAttempts; ++attempt) {
    if (client_.Cancelled()) return Cancelled(m.path);
    if (attempt > 1) RETURN_IF_ERROR(Backoff(attempt));
    a = DownloadAttempt(m, part, attempt);
    if (a.status.ok() || !a.retry) return a.status;
  }
  return absl::UnavailableError(
      absl::StrCat(a.status.message(), "; gave up after ", kMaxAttempts,
                   " attempts (the partial download stays in ", part,
                   " and resumes on the next fetch)"));
}

Fetcher::Attempt Fetcher::DownloadAttempt(const FileMeta& m,
                                          const std::string& part,
                                          int attempt) {
  const std::string& cache = options_.cache_dir;
  UniqueFd fd(::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (fd.get() < 0) return {FileError(errno, "cannot create", part, cache)};
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return {FileError(errno, "cannot stat", part, cache)};
  }
  const bool regular = S_ISREG(st.st_mode);
  int64_t pos = regular ? st.st_size : 0;
  Digest sha256(EVP_sha256());
  auto restart = [&]() -> absl::Status {
    if (regular && ::ftruncate(fd.get(), 0) != 0) {
      return FileError(errno, "cannot truncate", part, cache);
    }
    sha256.Reset();
    pos = 0;
    return absl::OkStatus();
  };
  if ((m.size >= 0 && pos > m.size) ||
      (pos > 0 && !HashPrefix(fd.get(), pos, sha256))) {
    if (absl::Status s = restart(); !s.ok()) return {s};
  }
  // What of this file the progress already counts (a resumed prefix counts
  // from the start); `done` grows only past it, so it never goes back when
  // a server ignores the Range and the file restarts.
  int64_t credited = pos;
  int write_errno = 0;
  bool range_mismatch = false;
  // A retry starts over at the Hub: a CDN URL is signed for a limited time.
  std::string url = attempt == 1 ? m.url : m.resolve_url;
  HttpResult r;
  if (m.size < 0 || pos < m.size) {
    bool decided = false;
    const BodySink sink = [&](const HttpResult& head, const char* data,
                              size_t n) {
      if (!decided) {
        decided = true;
        if (head.status == 206) {
          // "bytes <first>-<last>/<size>"
          const std::string content_range = head.Header("content-range");
          absl::string_view cr = content_range;
          int64_t first = -1;
          if (absl::ConsumePrefix(&cr, "bytes ")) {
            absl::SimpleAtoi(cr.substr(0, cr.find('-')), &first);
          }
          if (first != pos) {
            range_mismatch = true;
            return false;
          }
        } else if (pos > 0) {  // the whole file again
          if (!restart().ok()) {
            write_errno = errno;
            return false;
          }
        }
      }
      for (size_t off = 0; off < n;) {
        const ssize_t w =
            ::pwrite(fd.get(), data + off, n - off,
                     regular ? pos + static_cast<int64_t>(off) : 0);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          write_errno = w < 0 ? errno : EIO;
          return false;
        }
        off += static_cast<size_t>(w);
      }
      sha256.Update(data, n);
      pos += static_cast<int64_t>(n);
      if (pos > credited) {
        progress_.Add(pos - credited);
        credited = pos;
      }
      return true;
    };
    for (int hops = 0;; ++hops) {
      r = client_.Send("GET", url, pos, &sink);
      if (r.code == CURLE_OK && r.Redirect() && hops < kMaxRedirects) {
        std::optional<std::string> next = ResolveUrl(url, r.Header("location"));
        if (next.has_value()) {
          url = *next;
          continue;
        }
      }
      break;
    }
    if (write_errno != 0) {
      return {FileError(write_errno, "cannot write", part, cache)};
    }
    if (client_.Cancelled()) return {Cancelled(m.path)};
    if (range_mismatch) {
      if (absl::Status s = restart(); !s.ok()) return {s};
      return {absl::UnavailableError(absl::StrCat(
                  "GET ", url, ": the answer's Content-Range '",
                  r.Header("content-range"), "' does not continue byte ", pos)),
              true};
    }
    if (r.code == CURLE_OK && r.status == 416) {
      if (absl::Status s = restart(); !s.ok()) return {s};
      return {HttpError("GET", url, r, m.path), true};
    }
    if (r.code != CURLE_OK || !r.Success()) {
      const bool transient = r.status == 0 || r.Success() || r.status >= 500 ||
                             r.status == 429 || r.status == 408;
      absl::Status s = HttpError("GET", url, r, m.path);
      if (r.Success()) {  // the body broke off
        s = absl::UnavailableError(absl::StrCat(
            "GET ", url, ": ", r.curl_error, " after ", pos, " of ",
            m.size >= 0 ? absl::StrCat(m.size) : std::string("?"), " bytes"));
      }
      return {s, transient};
    }
    if (m.size >= 0 && pos < m.size) {
      return {absl::UnavailableError(absl::StrCat("GET ", url, ": got ", pos,
                                                  " of ", m.size, " bytes")),
              true};
    }
  }
  const auto data_loss = [&](absl::string_view what, absl::string_view want,
                             absl::string_view got) {
    ::unlink(part.c_str());
    return absl::DataLossError(
        absl::StrCat(ref_.repo, "/", m.path, " downloaded from ", url,
                     " does not match ", what, ": expected ", want, ", got ",
                     got, "; the download was deleted, fetch again"));
  };
  if (m.size >= 0 && pos != m.size) {
    return {data_loss("its size", absl::StrCat(m.size), absl::StrCat(pos))};
  }
  if (!m.sha256.empty()) {
    const std::string got = sha256.Hex();
    if (got != m.sha256) return {data_loss("its sha256", m.sha256, got)};
  } else if (!m.git_sha1.empty() && regular) {
    Digest sha1(EVP_sha1());
    const std::string header = absl::StrCat("blob ", pos, std::string(1, '\0'));
    sha1.Update(header.data(), header.size());
    if (!HashPrefix(fd.get(), pos, sha1)) {
      return {FileError(EIO, "cannot read back", part, cache)};
    }
    const std::string got = sha1.Hex();
    if (got != m.git_sha1) {
      return {data_loss("its git blob sha1", m.git_sha1, got)};
    }
  }
  if (regular && ::fdatasync(fd.get()) != 0 && errno != EINVAL) {
    return {FileError(errno, "cannot write", part, cache)};
  }
  const std::string blob = BlobPath(m.etag);
  if (::rename(part.c_str(), blob.c_str()) != 0) {
    return {FileError(errno, "cannot rename to", blob, cache)};
  }
  return {absl::OkStatus()};
}

absl::Status Fetcher::Link(const std::string& path, const std::string& etag) {
  const std::string link = absl::StrCat(SnapshotDir(), "/", path);
  // Relative, like huggingface_hub: one "../" per directory between the
  // link and the repo folder.
  std::string target;
  for (int i = 0,
           n = 2 + static_cast<int>(std::count(path.begin(), path.end(), '/'));
       i < n; ++i) {
    target += "../";
  }
  absl::StrAppend(&target, "blobs/", etag);
  RETURN_IF_ERROR(
      MakeDirs(fs::path(link).parent_path().string(), options_.cache_dir));
  if (::symlink(target.c_str(), link.c_str()) == 0) return absl::OkStatus();
  if (errno != EEXIST) {
    return FileError(errno, "cannot create", link, options_.cache_dir);
  }
  char buf[4096];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf));
  if (n >= 0 && absl::string_view(buf, static_cast<size_t>(n)) == target) {
    return absl::OkStatus();
  }
  // A different file of an older fetch: replace it in one step.
  const std::string tmp = TempName(link);
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0 ||
      ::rename(tmp.c_str(), link.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return FileError(err, "cannot replace", link, options_.cache_dir);
  }
  return absl::OkStatus();
}

absl::Status Fetcher::WriteRef() {
  if (ref_.revision == commit_) return absl::OkStatus();
  const std::string path = absl::StrCat(repo_dir_, "/refs/", ref_.revision);
  if (absl::StatusOr<std::string> old = ReadCapped(path, 4096);
      old.ok() && *old == commit_) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(
      MakeDirs(fs::path(path).parent_path().string(), options_.cache_dir));
  // Written beside the repo folder's entries, not in refs/, so that a crash
  // leaves no stray ref behind.
  const std::string tmp = TempName(absl::StrCat(repo_dir_, "/.ref"));
  {
    UniqueFd fd(
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
    if (fd.get() < 0) {
      return FileError(errno, "cannot create", tmp, options_.cache_dir);
    }
    if (::write(fd.get(), commit_.data(), commit_.size()) !=
        static_cast<ssize_t>(commit_.size())) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return FileError(err, "cannot write", tmp, options_.cache_dir);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return FileError(err, "cannot rename to", path, options_.cache_dir);
  }
  return absl::OkStatus();
}

absl::Status Fetcher::EnsureFile(const std::string& path) {
  ASSIGN_OR_RETURN(FileMeta m, Head(path));
  RETURN_IF_ERROR(EnsureBlob(m));
  return Link(path, m.etag);
}

absl::Status Fetcher::CheckFreeSpace(int64_t needed) const {
  if (needed <= 0) return absl::OkStatus();
  const std::string dir = absl::StrCat(repo_dir_, "/blobs");
  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) != 0) return absl::OkStatus();
  const int64_t free_bytes =
      static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  if (needed <= free_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("fetching ", ref_.repo, " needs ", HumanBytes(needed), ", ",
                   HumanBytes(free_bytes), " free on ", options_.cache_dir,
                   "; free space or set HF_HUB_CACHE"));
}

absl::StatusOr<std::string> Fetcher::Run() {
  if (!client_.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot use the Hub endpoint '", options_.endpoint,
                     "' (HF_ENDPOINT): not a URL, or libcurl failed to start"));
  }
  if (absl::Status s = GetRevision(); !s.ok()) return CacheFallback(s);
  if (absl::Status s = GetTree(); !s.ok()) return CacheFallback(s);
  RETURN_IF_ERROR(
      MakeDirs(absl::StrCat(repo_dir_, "/blobs"), options_.cache_dir));

  // The files the selection looks into are fetched (and cached) first.
  const HubFileReader read =
      [this](const std::string& path) -> absl::StatusOr<std::string> {
    RETURN_IF_ERROR(EnsureFile(path));
    return ReadCapped(BlobPath(metas_[path].etag), kSelectionFileCap);
  };
  ASSIGN_OR_RETURN(HubSelection selection, SelectHubFiles(files_, ref_, read));

  std::vector<const FileMeta*> metas;
  for (const std::string& path : selection.files) {
    RETURN_IF_ERROR(Head(path).status());
    metas.push_back(&metas_[path]);
  }
  int64_t total = 0, resumed = 0;
  std::set<std::string> planned;
  for (const FileMeta* m : metas) {
    const std::string blob = BlobPath(m->etag);
    if (Exists(blob) || !planned.insert(m->etag).second) continue;
    const int64_t have = RegularSize(absl::StrCat(blob, ".incomplete"));
    if (m->size >= 0) {
      total += m->size;
      resumed += std::min(have, m->size);
    }
  }
  RETURN_IF_ERROR(CheckFreeSpace(total - resumed));
  progress_.Start(resumed, total);
  for (const FileMeta* m : metas) {
    if (client_.Cancelled()) return Cancelled(m->path);
    RETURN_IF_ERROR(EnsureBlob(*m));
    RETURN_IF_ERROR(Link(m->path, m->etag));
  }
  if (client_.Cancelled()) return Cancelled("before the ref was written");
  RETURN_IF_ERROR(WriteRef());
  progress_.Finish();
  return selection.entry.empty()
             ? SnapshotDir()
             : absl::StrCat(SnapshotDir(), "/", selection.entry);
}

// ResolveInHfCache, plus split GGUF sets (several parts are one model).
absl::StatusOr<std::string> ResolveCached(const std::string& cache_dir,
                                          const HubModelRef& ref) {
  absl::StatusOr<std::string> path = ResolveInHfCache(cache_dir, ref);
  if (path.ok() || !absl::IsInvalidArgument(path.status())) return path;
  const std::string repo_dir =
      absl::StrCat(cache_dir, "/", RepoFolder(ref.repo));
  std::string commit = ref.revision;
  if (!IsCommitHash(commit)) {
    absl::StatusOr<std::string> text =
        ReadCapped(absl::StrCat(repo_dir, "/refs/", ref.revision), 4096);
    if (!text.ok()) return path;
    commit = std::string(absl::StripAsciiWhitespace(*text));
  }
  const std::string snapshot = absl::StrCat(repo_dir, "/snapshots/", commit);
  std::vector<std::string> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(snapshot, ec)) {
    files.push_back(e.path().filename().string());
  }
  const HubFileReader no_read =
      [](const std::string& p) -> absl::StatusOr<std::string> {
    return absl::NotFoundError(p);
  };
  absl::StatusOr<HubSelection> sel = SelectHubFiles(files, ref, no_read);
  if (!sel.ok() || sel->entry.empty()) return path;
  for (const std::string& f : sel->files) {
    if (!IsRegular(absl::StrCat(snapshot, "/", f))) return path;
  }
  return absl::StrCat(snapshot, "/", sel->entry);
}

// ----------------------------------------------------------------------------
// Selection.

bool HasExt(absl::string_view path, absl::string_view ext) {
  return absl::EndsWithIgnoreCase(path, ext);
}

// Weight formats inferd does not read; skipped everywhere.
bool ForeignFormat(absl::string_view path) {
  for (absl::string_view ext :
       {".onnx", ".onnx_data", ".msgpack", ".h5", ".ot", ".tflite", ".mlmodel",
        ".pb", ".gguf", ".ckpt"}) {
    if (HasExt(path, ext)) return true;
  }
  return false;
}

bool TorchWeights(absl::string_view path) {
  return HasExt(path, ".bin") || HasExt(path, ".pt") || HasExt(path, ".pth");
}

// The shards an index (model.safetensors.index.json or
// pytorch_model.bin.index.json) names, relative to the repo root.
absl::StatusOr<std::vector<std::string>> IndexShards(
    const std::string& index_path, const std::string& text,
    const std::set<std::string>& have, const HubModelRef& ref) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto map = j.is_object() ? j.find("weight_map") : j.end();
  if (!j.is_object() || map == j.end() || !map->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        ref.repo, "/", index_path, " has no \"weight_map\" object"));
  }
  const std::string dir = index_path.find('/') == std::string::npos
                              ? ""
                              : index_path.substr(0, index_path.rfind('/') + 1);
  std::set<std::string> shards;
  for (auto it = map->begin(); it != map->end(); ++it) {
    if (!it->is_string() || !SafeRepoPath(it->get_ref<const std::string&>())) {
      return absl::InvalidArgumentError(
          absl::StrCat(ref.repo, "/", index_path, ": tensor '", it.key(),
                       "' names no usable shard"));
    }
    const std::string shard = dir + it->get<std::string>();
    if (have.count(shard) == 0) {
      return absl::NotFoundError(absl::StrCat(
          ref.repo, "/", index_path, " names shard ", shard,
          ", which the repo does not have at revision ", ref.revision));
    }
    shards.insert(shard);
  }
  if (shards.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ref.repo, "/", index_path, ": weight_map is empty"));
  }
  return std::vector<std::string>(shards.begin(), shards.end());
}

// The weights of a model directory under `dir` ("" or "sub/"): one format,
// safetensors first. Empty when it has none.
absl::StatusOr<std::vector<std::string>> DirWeights(
    const std::string& dir, const std::set<std::string>& have,
    const HubModelRef& ref, const HubFileReader& read) {
  for (const char* base : {"model.safetensors", "pytorch_model.bin"}) {
    const std::string single = dir + base;
    if (have.count(single)) return std::vector<std::string>{single};
    const std::string index = absl::StrCat(single, ".index.json");
    if (have.count(index)) {
      ASSIGN_OR_RETURN(std::string text, read(index));
      ASSIGN_OR_RETURN(std::vector<std::string> shards,
                       IndexShards(index, text, have, ref));
      shards.push_back(index);
      return shards;
    }
  }
  return std::vector<std::string>{};
}

absl::StatusOr<HubSelection> SelectGguf(
    const std::vector<std::string>& repo_files, const HubModelRef& ref) {
  std::vector<std::string> ggufs;       // top level, for the messages
  std::vector<std::string> candidates;  // split sets by their first part
  for (const std::string& f : repo_files) {
    if (f.find('/') != std::string::npos || !HasExt(f, ".gguf")) continue;
    ggufs.push_back(f);
    std::optional<SplitGguf> split = ParseSplitGguf(f);
    if (!split.has_value() || split->part == 1) candidates.push_back(f);
  }
  std::sort(ggufs.begin(), ggufs.end());
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::string> picked;
  for (const std::string& g : candidates) {
    if (ref.quant.empty() ||
        absl::StrContains(absl::AsciiStrToLower(g),
                          absl::AsciiStrToLower(ref.quant))) {
      picked.push_back(g);
    }
  }
  if (picked.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "Hugging Face model '", ref.repo, "': no .gguf file matching '",
        ref.quant, "' in the repo (it has: ",
        ggufs.empty() ? "none" : absl::StrJoin(ggufs, ", "), ")"));
  }
  if (picked.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Hugging Face model '", ref.repo, "' has several .gguf files (",
        absl::StrJoin(picked, ", "), "); name one: ", ref.repo, ":QUANT or ",
        ref.repo, "/FILE.gguf"));
  }
  HubSelection s;
  s.entry = picked[0];
  s.files.push_back(picked[0]);
  return s;
}

// All parts of the split set `entry` belongs to (just `entry` when it is
// not a split part); the entry becomes the first part.
absl::Status ExpandSplit(const std::set<std::string>& have,
                         const HubModelRef& ref, HubSelection& s) {
  std::optional<SplitGguf> split = ParseSplitGguf(s.entry);
  if (!split.has_value()) return absl::OkStatus();
  s.files.clear();
  for (int k = 1; k <= split->count; ++k) {
    const std::string part = SplitPartName(*split, k);
    if (have.count(part) == 0) {
      return absl::NotFoundError(
          absl::StrCat("Hugging Face model '", ref.repo, "': the split GGUF ",
                       s.entry, " lacks part ", part, " in the repo"));
    }
    s.files.push_back(part);
  }
  s.entry = SplitPartName(*split, 1);
  return absl::OkStatus();
}

}  // namespace

HubFetchOptions HubFetchOptionsFromEnv() {
  HubFetchOptions o;
  o.endpoint = Env("HF_ENDPOINT");
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  if (o.endpoint.empty()) o.endpoint = kDefaultEndpoint;
  o.token = Env("HF_TOKEN");
  if (o.token.empty()) o.token = Env("HUGGING_FACE_HUB_TOKEN");
  if (o.token.empty()) {
    // Where `hf auth login` stores it.
    std::string path = Env("HF_TOKEN_PATH");
    if (path.empty()) {
      std::string home = Env("HF_HOME");
      if (home.empty()) {
        const std::string xdg = Env("XDG_CACHE_HOME");
        home = xdg.empty() ? Env("HOME") + "/.cache/huggingface"
                           : xdg + "/huggingface";
      }
      path = home + "/token";
    }
    if (absl::StatusOr<std::string> t = ReadCapped(path, 4096); t.ok()) {
      o.token = std::string(absl::StripAsciiWhitespace(*t));
    }
  }
  o.cache_dir = HfHubCacheDir();
  const std::string offline =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(Env("HF_HUB_OFFLINE")));
  o.offline = offline == "1" || offline == "true" || offline == "yes" ||
              offline == "on";
  return o;
}

absl::StatusOr<HubSelection> SelectHubFiles(
    const std::vector<std::string>& repo_files, const HubModelRef& ref,
    const HubFileReader& read) {
  const std::set<std::string> have(repo_files.begin(), repo_files.end());
  HubSelection s;
  if (!ref.file.empty()) {
    if (have.count(ref.file) == 0) {
      return absl::NotFoundError(absl::StrCat("Hugging Face model '", ref.repo,
                                              "' has no file ", ref.file,
                                              " at revision ", ref.revision));
    }
    s.entry = ref.file;
    s.files.push_back(ref.file);
    RETURN_IF_ERROR(ExpandSplit(have, ref, s));
    return s;
  }
  bool top_gguf = false;
  for (const std::string& f : repo_files) {
    if (f.find('/') == std::string::npos && HasExt(f, ".gguf")) top_gguf = true;
  }
  if (!ref.quant.empty() || (top_gguf && have.count("config.json") == 0)) {
    ASSIGN_OR_RETURN(s, SelectGguf(repo_files, ref));
    RETURN_IF_ERROR(ExpandSplit(have, ref, s));
    return s;
  }

  // A Hugging Face model directory.
  std::set<std::string> out;
  for (const char* name :
       {"config.json", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
        "spiece.model", "sentencepiece.bpe.model", "vocab.txt", "merges.txt",
        "vocab.json", "added_tokens.json", "chat_template.json",
        "chat_template.jinja", "modules.json",
        "config_sentence_transformers.json", "sentence_bert_config.json"}) {
    if (have.count(name)) out.insert(name);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> weights,
                   DirWeights("", have, ref, read));
  bool has_weights = !weights.empty();
  out.insert(weights.begin(), weights.end());
  // BGE-M3's heads (runtime/loader/m3_heads.h), safetensors copies first.
  for (const char* head : {"sparse_linear", "colbert_linear"}) {
    for (const char* ext : {".safetensors", ".pt"}) {
      const std::string f = absl::StrCat(head, ext);
      if (have.count(f)) {
        out.insert(f);
        break;
      }
    }
  }
  // sentence-transformers modules: everything under each listed directory
  // (a Pooling or Dense config, a Dense layer's weights, or a whole
  // Transformer), one weight format per directory.
  if (have.count("modules.json")) {
    ASSIGN_OR_RETURN(std::string text, read("modules.json"));
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          ref.repo, "/modules.json is not a JSON array of modules"));
    }
    for (const nlohmann::json& mod : j) {
      auto p = mod.is_object() ? mod.find("path") : mod.end();
      if (!mod.is_object() || p == mod.end() || !p->is_string()) continue;
      std::string dir(absl::StripSuffix(p->get_ref<const std::string&>(), "/"));
      if (dir.empty() || dir == ".") continue;  // the repo root, done above
      if (!SafeRepoPath(dir)) {
        return absl::InvalidArgumentError(
            absl::StrCat(ref.repo, "/modules.json lists module path '", dir,
                         "' outside the repo"));
      }
      const std::string prefix = dir + "/";
      bool dir_safetensors = false;
      for (const std::string& f : repo_files) {
        if (absl::StartsWith(f, prefix) && HasExt(f, ".safetensors")) {
          dir_safetensors = true;
        }
      }
      for (const std::string& f : repo_files) {
        if (!absl::StartsWith(f, prefix) || ForeignFormat(f)) continue;
        if (dir_safetensors && TorchWeights(f)) continue;
        bool skip = false;  // exports for other runtimes
        for (absl::string_view seg :
             absl::StrSplit(f.substr(prefix.size()), '/')) {
          if (seg == "onnx" || seg == "openvino" || seg == "coreml")
            skip = true;
        }
        if (skip) continue;
        out.insert(f);
        if (HasExt(f, ".safetensors") || TorchWeights(f)) has_weights = true;
      }
    }
  }
  if (!has_weights) {
    std::vector<std::string> listing(repo_files.begin(), repo_files.end());
    std::sort(listing.begin(), listing.end());
    if (listing.size() > 20) {
      listing.resize(20);
      listing.push_back("...");
    }
    return absl::NotFoundError(absl::StrCat(
        "Hugging Face model '", ref.repo,
        "' has no weights inferd reads (model.safetensors, "
        "model.safetensors.index.json, pytorch_model.bin or a .gguf file; "
        "it has: ",
        listing.empty() ? "no files" : absl::StrJoin(listing, ", "), ")"));
  }
  s.files.assign(out.begin(), out.end());
  return s;
}

absl::StatusOr<std::string> FetchHubModel(const HubModelRef& ref,
                                          const HubFetchOptions& given) {
  if (std::optional<HubModelRef> parsed = ParseHubModelRef(ref.repo);
      !parsed.has_value() || parsed->repo != ref.repo ||
      !parsed->quant.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", ref.repo, "' is not a Hugging Face repo id (org/name)"));
  }
  if (!SafeRevision(ref.revision)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hugging Face model '", ref.repo, "': unusable revision '",
                     ref.revision, "'"));
  }
  HubFetchOptions options = given;
  while (!options.endpoint.empty() && options.endpoint.back() == '/') {
    options.endpoint.pop_back();
  }
  if (options.endpoint.empty()) options.endpoint = kDefaultEndpoint;
  if (options.cache_dir.empty()) options.cache_dir = HfHubCacheDir();
  if (options.offline) {
    absl::StatusOr<std::string> path = ResolveCached(options.cache_dir, ref);
    if (absl::IsNotFound(path.status())) {
      return absl::NotFoundError(
          absl::StrCat(path.status().message(), " (HF_HUB_OFFLINE is set)"));
    }
    return path;
  }
  // A file of a pinned commit never changes: like huggingface_hub, a cached
  // copy needs no network.
  if (IsCommitHash(ref.revision) && (!ref.file.empty() || !ref.quant.empty())) {
    absl::StatusOr<std::string> path = ResolveCached(options.cache_dir, ref);
    if (path.ok() && IsRegular(*path)) return path;
  }
  static absl::once_flag curl_once;
  absl::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  Fetcher fetcher(ref, options);
  return fetcher.Run();
}

}  // namespace inferd
