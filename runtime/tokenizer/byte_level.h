// The GPT-2 byte-to-unicode table used by byte-level BPE: every byte maps to
// a printable code point so byte strings can live in a text vocabulary.
// Immutable tables; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_BYTE_LEVEL_H_
#define INFERD_RUNTIME_TOKENIZER_BYTE_LEVEL_H_

#include <array>
#include <cstdint>
#include <string>

namespace inferd {
namespace tokenizer_internal {

struct ByteLevelTables {
  std::array<char32_t, 256> byte_to_char;
  std::array<std::string, 256> byte_to_utf8;
  // Code points used are < 324; -1 where a code point is not in the table.
  std::array<int16_t, 512> char_to_byte;
};

const ByteLevelTables& GetByteLevelTables();

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_BYTE_LEVEL_H_
