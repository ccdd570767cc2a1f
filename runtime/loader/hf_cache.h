// Models by their Hugging Face Hub names, from the standard Hugging Face
// cache (what `huggingface_hub` and `hf download` write): a name such as
//   org/repo                 a Hugging Face model directory, or a GGUF
//                            repo with one .gguf file
//   org/repo:Q4_K_M          a GGUF repo's file whose name holds Q4_K_M
//   org/repo/file.gguf       that file of the repo
//   ...@REVISION             a branch, tag or commit (default main)
// resolves to $HF_HUB_CACHE (or $HF_HOME/hub, or ~/.cache/huggingface/hub)
// /models--org--repo/snapshots/<commit>[/file], the commit read from
// refs/<revision> (or given as 40 hex digits). Downloading from the Hub is
// runtime/loader/hf_download.h: here a model missing from the cache is
// NOT_FOUND naming what is missing and how to fetch it. Pure functions;
// thread-safe.
#ifndef INFERD_RUNTIME_LOADER_HF_CACHE_H_
#define INFERD_RUNTIME_LOADER_HF_CACHE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inferd {

struct HubModelRef {
  std::string repo;               // org/repo
  std::string revision = "main";  // branch, tag or commit
  std::string file;               // a file in the repo (org/repo/file.gguf)
  std::string quant;              // a GGUF file's quantization (org/repo:Q4_K_M)
};

// The Hub name `name` spells, or nothing when it is not one (a path that
// starts with '/', '.' or '~', or has not exactly two name segments before
// an optional file).
std::optional<HubModelRef> ParseHubModelRef(absl::string_view name);

// The cache directory: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::string HfHubCacheDir();

// The local path of `ref` in the cache at `cache_dir`: the snapshot
// directory (a Hugging Face model directory) or the chosen .gguf file.
// NOT_FOUND naming the missing piece (repo, ref, snapshot, file) and how to
// fetch it; INVALID_ARGUMENT when the snapshot holds several .gguf files and
// the name does not pick one (the message lists them).
absl::StatusOr<std::string> ResolveInHfCache(const std::string& cache_dir,
                                             const HubModelRef& ref);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_HF_CACHE_H_
