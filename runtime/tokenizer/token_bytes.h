// TokenByteStrings: the bytes each token id adds to decoded text, for token
// masks over a vocabulary (structured output). Stateless; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_TOKEN_BYTES_H_
#define INFERD_RUNTIME_TOKENIZER_TOKEN_BYTES_H_

#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace inferd {

// One entry per id in [0, tok.vocab_size()): the bytes the token appends
// when it follows other text (so a SentencePiece "▁the" is " the", a
// byte-level "Ġthe" is " the", "<0x0A>" is "\n", a byte-level piece of a
// multi-byte character is its raw byte). Empty for special tokens and ids
// without a token.
std::vector<std::string> TokenByteStrings(const Tokenizer& tok);

}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_TOKEN_BYTES_H_
