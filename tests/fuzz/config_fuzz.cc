// libFuzzer target: the loader's JSON config parsers. The first byte picks
// the parser (config.json, tokenizer_config.json, modules.json, pooling,
// prompts, sentence_bert_config.json); the rest is the file text. Parsers
// must return a status for any input, never crash.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "runtime/loader/config_parser.h"
#include "runtime/loader/model_config.h"
#include "runtime/loader/st_config.h"
#include "runtime/loader/tokenizer_config.h"

// Start-up: the loader's config parsers, as inferd's main registers them.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inferd::RegisterLoaderBuiltins();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  inferd::SentenceTransformersConfig st;
  switch (data[0] % 6) {
    case 0: {
      auto c = inferd::ParseModelConfig(text, "fuzz");
      if (c.ok()) {
        // Accepted configs must be internally consistent.
        if (c->hidden_size <= 0 || c->num_key_value_heads <= 0 ||
            c->num_attention_heads % c->num_key_value_heads != 0 ||
            c->head_dim <= 0 || c->num_labels < 1) {
          __builtin_trap();
        }
        for (int64_t layer = 0; layer < 4; ++layer) {
          (void)c->SlidingWindowForLayer(layer);
        }
        (void)c->position_id_offset();
      }
      break;
    }
    case 1:
      (void)inferd::ParseTokenizerConfig(text, "fuzz");
      break;
    case 2:
      (void)inferd::ParseStModules(text, "fuzz", st);
      break;
    case 3:
      (void)inferd::ParseStPooling(text, "fuzz", st);
      break;
    case 4:
      (void)inferd::ParseStPrompts(text, "fuzz", st);
      break;
    case 5:
      (void)inferd::ParseStBertConfig(text, "fuzz", st);
      break;
  }
  return 0;
}
