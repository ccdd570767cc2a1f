#include "runtime/loader/hf_cache.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

// A Hub name segment: letters, digits, '-', '_', '.'; not "." or "..".
bool NameSegment(absl::string_view s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

bool IsCommitHash(absl::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string FetchHint(const HubModelRef& ref) {
  return absl::StrCat("fetch it first, e.g. `hf download ", ref.repo,
                      ref.revision == "main"
                          ? std::string()
                          : absl::StrCat(" --revision ", ref.revision),
                      "`, or let inferd download it (unset HF_HUB_OFFLINE; "
                      "HF_ENDPOINT names the Hub)");
}

}  // namespace

std::optional<HubModelRef> ParseHubModelRef(absl::string_view name) {
  if (name.empty() || name[0] == '/' || name[0] == '.' || name[0] == '~') {
    return std::nullopt;
  }
  HubModelRef ref;
  absl::string_view rest = name;
  if (const size_t at = rest.rfind('@'); at != absl::string_view::npos) {
    ref.revision = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
    if (ref.revision.empty()) return std::nullopt;
    for (char c : ref.revision) {
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.' &&
          c != '/') {
        return std::nullopt;
      }
    }
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  if (parts.size() < 2) return std::nullopt;
  absl::string_view repo_name = parts[1];
  if (parts.size() == 2) {
    if (const size_t colon = repo_name.find(':');
        colon != absl::string_view::npos) {
      ref.quant = std::string(repo_name.substr(colon + 1));
      repo_name = repo_name.substr(0, colon);
      if (ref.quant.empty()) return std::nullopt;
    }
  } else {
    ref.file = absl::StrJoin(parts.begin() + 2, parts.end(), "/");
    for (size_t i = 2; i < parts.size(); ++i) {
      if (!NameSegment(parts[i])) return std::nullopt;
    }
  }
  if (!NameSegment(parts[0]) || !NameSegment(repo_name)) return std::nullopt;
  ref.repo = absl::StrCat(parts[0], "/", repo_name);
  return ref;
}

std::string HfHubCacheDir() {
  if (std::string v = Env("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = Env("HF_HOME"); !v.empty()) return v + "/hub";
  if (std::string v = Env("XDG_CACHE_HOME"); !v.empty()) {
    return v + "/huggingface/hub";
  }
  return Env("HOME") + "/.cache/huggingface/hub";
}

absl::StatusOr<std::string> ResolveInHfCache(const std::string& cache_dir,
                                             const HubModelRef& ref) {
  const fs::path repo_dir =
      fs::path(cache_dir) /
      absl::StrCat("models--", absl::StrReplaceAll(ref.repo, {{"/", "--"}}));
  std::error_code ec;
  if (!fs::is_directory(repo_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "Hugging Face model '", ref.repo, "' is not in the cache ",
        cache_dir, " (no ", repo_dir.filename().string(), "); ",
        FetchHint(ref)));
  }
  std::string commit = ref.revision;
  if (!IsCommitHash(commit)) {
    std::ifstream in(repo_dir / "refs" / ref.revision);
    std::string line;
    if (!in || !std::getline(in, line) ||
        !IsCommitHash(absl::StripAsciiWhitespace(line))) {
      return absl::NotFoundError(absl::StrCat(
          "Hugging Face model '", ref.repo, "': revision '", ref.revision,
          "' is not in the cache (no refs/", ref.revision, " in ",
          repo_dir.string(), "); ", FetchHint(ref)));
    }
    commit = std::string(absl::StripAsciiWhitespace(line));
  }
  const fs::path snapshot = repo_dir / "snapshots" / commit;
  if (!fs::is_directory(snapshot, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "Hugging Face model '", ref.repo, "': snapshot ", commit,
        " is not in the cache (", snapshot.string(), "); ", FetchHint(ref)));
  }
  if (!ref.file.empty()) {
    const fs::path file = snapshot / ref.file;
    if (!fs::is_regular_file(file, ec)) {  // follows the blob symlink
      return absl::NotFoundError(absl::StrCat(
          "Hugging Face model '", ref.repo, "': ", ref.file,
          " is not in the cached snapshot ", snapshot.string(), "; ",
          FetchHint(ref)));
    }
    return file.string();
  }
  std::vector<std::string> ggufs;
  for (const fs::directory_entry& e : fs::directory_iterator(snapshot, ec)) {
    const std::string n = e.path().filename().string();
    if (absl::EndsWithIgnoreCase(n, ".gguf")) ggufs.push_back(n);
  }
  std::sort(ggufs.begin(), ggufs.end());
  const bool hf_dir = fs::is_regular_file(snapshot / "config.json", ec);
  if (ref.quant.empty() && (hf_dir || ggufs.empty())) return snapshot.string();
  std::vector<std::string> picked;
  for (const std::string& g : ggufs) {
    if (ref.quant.empty() ||
        absl::StrContains(absl::AsciiStrToLower(g),
                          absl::AsciiStrToLower(ref.quant))) {
      picked.push_back(g);
    }
  }
  if (picked.size() == 1) return (snapshot / picked[0]).string();
  if (picked.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "Hugging Face model '", ref.repo, "': no .gguf file matching '",
        ref.quant, "' in the cached snapshot (it has: ",
        ggufs.empty() ? "none" : absl::StrJoin(ggufs, ", "), ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "Hugging Face model '", ref.repo, "' has several .gguf files (",
      absl::StrJoin(picked, ", "), "); name one: ", ref.repo,
      ":QUANT or ", ref.repo, "/FILE.gguf"));
}

}  // namespace inferd
