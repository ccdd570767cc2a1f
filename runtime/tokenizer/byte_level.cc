#include "runtime/tokenizer/byte_level.h"

#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {

const ByteLevelTables& GetByteLevelTables() {
  static const ByteLevelTables* tables = [] {
    auto* t = new ByteLevelTables();
    t->char_to_byte.fill(-1);
    // Printable bytes map to themselves; the others to 256, 257, ... in
    // byte order.
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
             (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = printable(b) ? char32_t(b) : char32_t(next++);
      t->byte_to_char[b] = c;
      t->byte_to_utf8[b] = EncodeUtf8(c);
      t->char_to_byte[c] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return *tables;
}

}  // namespace tokenizer_internal
}  // namespace inferd
