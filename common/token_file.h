// Token datasets larger than memory (docs/DESIGN.md §6.9): a flat file of
// token ids as nanoGPT and Megatron-LM keep a pretraining corpus (`train.bin`
// of uint16, or uint32 for vocabularies over 65,536), or a 1-D `.npy` array
// of unsigned or signed integers, memory-mapped read-only. A sample is a
// window of T + 1 consecutive tokens: the first T are forward's tokens, the
// last T its targets.
//
// Windows: sequential (window j starts at token (j mod W) x T, W = (N - 1)
// / T whole windows) or random (sample s starts at a position drawn by
// SplitMix64 from (seed, s), uniform over [0, N - T - 1]): a function of the
// sample's index alone, so a resumed run draws the windows it would have.
// Each window's ids are checked against the vocabulary as it is read (no
// scan of the file); its pages are released from the mapping after the copy,
// so the process's resident memory does not grow with the file.
//
// Thread-safety: Window may be called from several threads at once.

#ifndef HARMONY_COMMON_TOKEN_FILE_H_
#define HARMONY_COMMON_TOKEN_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "common/tensor_file.h"

namespace harmony::common {

enum class TokenType { kUint16, kUint32, kInt32, kInt64 };

// "uint16", "uint32"; InvalidArgument naming --token-dtype otherwise.
absl::StatusOr<TokenType> ParseTokenType(const std::string& text);
const char* TokenTypeName(TokenType type);

// Whether `path` names a token file: it ends in .bin or .npy.
bool IsTokenFile(const std::string& path);

class TokenFile {
 public:
  // Maps `path`: a .npy file (its header says the type: uint16, uint32,
  // int32, int64, little-endian, C order, 1-D) or a flat file of `type`
  // (required then). InvalidArgument naming the file and what is wrong; a
  // file with fewer than seq_len + 1 tokens is refused.
  static absl::StatusOr<std::unique_ptr<TokenFile>> Open(const std::string& path,
                                                         std::optional<TokenType> type,
                                                         int64_t seq_len);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  TokenType type() const { return type_; }
  int64_t tokens() const { return tokens_; }
  int64_t seq_len() const { return seq_len_; }
  // Whole sequential windows: (tokens - 1) / seq_len.
  int64_t windows() const { return (tokens_ - 1) / seq_len_; }
  uint64_t file_bytes() const { return bytes_; }

  // The first token of sample `index`'s window.
  int64_t Start(int64_t index, bool random, uint64_t seed) const;
  // The seq_len + 1 tokens from `start`, as int64. InvalidArgument naming
  // the file, the token's offset and its value when one is negative or at
  // least `vocab` (vocab > 0).
  absl::StatusOr<at::Tensor> Window(int64_t start, int64_t vocab) const;

  // `count` windows from sample `first` on, as training data (inputs and
  // targets of [count, seq_len] int64): a plan's sample input.
  absl::StatusOr<TrainingData> Samples(int64_t first, int64_t count, bool random, uint64_t seed,
                                       int64_t vocab) const;

 private:
  TokenFile() = default;

  std::string path_;
  TokenType type_ = TokenType::kUint16;
  int64_t seq_len_ = 1;
  int64_t tokens_ = 0;
  uint64_t bytes_ = 0;         // Of the mapping (the whole file).
  uint64_t data_offset_ = 0;   // Past a .npy header.
  const uint8_t* map_ = nullptr;
};

// A sample of the data at `path` for the planner: a torch.save file as
// LoadTrainingData reads it, or a token file's first windows (up to 256),
// with `token_dtype` ("uint16", "uint32"; "" for .npy) and `seq_len`.
absl::StatusOr<TrainingData> LoadSample(const std::string& path, const std::string& token_dtype,
                                        int64_t seq_len);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_TOKEN_FILE_H_
