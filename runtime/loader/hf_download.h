// Downloads models by their Hugging Face Hub names (runtime/loader/hf_cache.h)
// into the standard Hugging Face cache, laid out as huggingface_hub writes
// it: blobs/<etag>, snapshots/<commit>/<path> relative symlinks to them,
// refs/<revision>, and per-blob locks under <cache>/.locks, so both tools
// share one cache. Only the files the loader reads are fetched. Transfers
// resume from blobs/<etag>.incomplete; LFS blobs are checked against their
// sha256. Thread-safe: concurrent fetches (threads or processes) of the same
// repo serialize per blob; there is no global state besides libcurl's
// one-time initialization.
#ifndef INFERD_RUNTIME_LOADER_HF_DOWNLOAD_H_
#define INFERD_RUNTIME_LOADER_HF_DOWNLOAD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/loader/hf_cache.h"

namespace inferd {

struct HubFetchOptions {
  // HF_ENDPOINT; empty means https://huggingface.co.
  std::string endpoint = "https://huggingface.co";
  // HF_TOKEN (or HUGGING_FACE_HUB_TOKEN, or the file `hf auth login`
  // writes); sent as `Authorization: Bearer` to the endpoint's host only.
  std::string token;
  std::string cache_dir;  // empty means HfHubCacheDir()
  // HF_HUB_OFFLINE: the cache only, no network.
  bool offline = false;
  // Called on the fetching thread: once before the first byte with the
  // totals, then at most about ten times a second as bytes arrive, and once
  // at the end. `done` never decreases; `total` counts the bytes of the
  // files this fetch downloads (cached blobs are not counted; bytes of a
  // resumed .incomplete count as done from the start).
  std::function<void(int64_t done, int64_t total)> progress;
  // When it turns true the fetch stops soon with CANCELLED; a partial
  // download stays in blobs/<etag>.incomplete for the next fetch to resume.
  const std::atomic<bool>* cancel = nullptr;
};

// Options from HF_ENDPOINT, HF_TOKEN / HUGGING_FACE_HUB_TOKEN (else the
// token file at $HF_TOKEN_PATH or $HF_HOME/token), HF_HUB_OFFLINE ("1",
// "true", "yes", "on") and HfHubCacheDir().
HubFetchOptions HubFetchOptionsFromEnv();

// Reads a repo file that the selection depends on
// (model.safetensors.index.json, pytorch_model.bin.index.json, modules.json).
using HubFileReader =
    std::function<absl::StatusOr<std::string>(const std::string& path)>;

struct HubSelection {
  std::vector<std::string> files;  // repo paths to fetch, sorted
  // The file the loader opens (the chosen .gguf, the first part of a split
  // GGUF, or ref.file); empty for a model directory.
  std::string entry;
};

// The files of a repo (`repo_files`, paths relative to its root) that the
// loader needs for `ref`. A GGUF pick (ref.file, ref.quant, or a repo whose
// only model files are top-level .gguf files) follows ResolveInHfCache's
// rules and messages, with a split GGUF set ("-00001-of-00003.gguf") counted
// as one file and fetched whole. A model directory gets its configs and
// tokenizer files, one weight format (safetensors first; every shard the
// index names), the BGE-M3 heads, and sentence-transformers modules with
// every file under the directories modules.json lists. `read` is called
// only for files the selection must look into.
absl::StatusOr<HubSelection> SelectHubFiles(
    const std::vector<std::string>& repo_files, const HubModelRef& ref,
    const HubFileReader& read);

// Makes `ref` available in options.cache_dir and returns its local path:
// the snapshot directory or the entry file, as ResolveInHfCache gives it
// (for a split GGUF, its first part). Offline: the cache only. Online: the
// revision's commit from the Hub and the files SelectHubFiles picks, each
// checked with a HEAD and downloaded unless its blob is cached; when the
// Hub cannot be reached (network error, 5xx) a cached copy is used. A
// commit-pinned file already cached needs no network at all.
// Errors: NOT_FOUND (repo, revision, file), PERMISSION_DENIED (gated or
// private repo; the message says what to do with HF_TOKEN), UNAVAILABLE
// (network, 5xx, retries exhausted), DATA_LOSS (sha256 mismatch),
// RESOURCE_EXHAUSTED (disk space), CANCELLED, INVALID_ARGUMENT (an
// ambiguous GGUF pick, a bad revision name).
absl::StatusOr<std::string> FetchHubModel(const HubModelRef& ref,
                                          const HubFetchOptions& options);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_HF_DOWNLOAD_H_
