// Decoders of tokenizer.json (ByteLevel, Metaspace, WordPiece, BPEDecoder,
// ByteFallback, Fuse, Strip, Replace, CTC, Sequence): they map the token
// strings of ids back to text, each step rewriting the list of strings.
// Immutable after construction; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_DECODERS_H_
#define INFERD_RUNTIME_TOKENIZER_DECODERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/json_util.h"

namespace inferd {
namespace tokenizer_internal {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
};

absl::StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const Json& j);

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_DECODERS_H_
