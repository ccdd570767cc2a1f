// libFuzzer target: arbitrary bytes parsed as a GGUF file. Every input must
// yield either an error status or a file whose metadata and tensor ranges
// lie inside the buffer; touching each tensor's bytes lets ASan catch lies.
// A file that parses is then read as a model (config from the metadata,
// tensors under Hugging Face names, the tokenizer built from
// tokenizer.ggml.*): errors, never crashes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/string_view.h"
#include "runtime/loader/gguf.h"
#include "runtime/loader/gguf_model.h"
#include "runtime/loader/gguf_tokenizer.h"

namespace {

uint64_t Touch(const inferd::GgufValue& v) {
  uint64_t sum = v.u + static_cast<uint64_t>(v.i) + v.s.size();
  for (const inferd::GgufValue& e : v.elements) sum += Touch(e);
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = inferd::GgufFile::FromBuffer(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!file.ok()) return 0;
  uint64_t sum = 0;
  for (const auto& [key, value] : (*file)->metadata()) sum += Touch(value);
  for (const inferd::GgufTensorInfo& t : (*file)->tensors()) {
    if ((*file)->FindTensor(t.name) != &t) __builtin_trap();
    if (t.type == nullptr || t.data == nullptr) __builtin_trap();
    for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
  }
  std::shared_ptr<const inferd::GgufFile> shared = std::move(file).value();
  auto config = inferd::GgufModelConfig(*shared);
  if (config.ok()) sum += static_cast<uint64_t>(config->hidden_size);
  auto tok = inferd::LoadGgufTokenizer(*shared);
  if (tok.ok()) sum += tok->tokenizer_json.size();
  auto weights = inferd::GgufWeights(shared);
  if (weights.ok()) sum += (*weights)->tensor_count();
  if (sum == 0xdeadbeefcafef00dull) return 1;  // keep the reads alive
  return 0;
}
