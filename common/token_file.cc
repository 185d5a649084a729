#include "common/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>

#include <ATen/ATen.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/host_memory.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "common/units.h"

namespace harmony::common {
namespace {

int Width(TokenType t) {
  switch (t) {
    case TokenType::kUint16: return 2;
    case TokenType::kUint32:
    case TokenType::kInt32: return 4;
    default: return 8;
  }
}

// The .npy header: its type, its element count and where the data begins.
absl::Status ParseNpy(const std::string& path, const uint8_t* p, uint64_t size, TokenType* type,
                      int64_t* count, uint64_t* offset) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a .npy file of token ids: ", why));
  };
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) return bad("no NUMPY magic");
  const int major = p[6];
  uint64_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = p[8] | (static_cast<uint64_t>(p[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return bad("truncated header");
    header_len = p[8] | (static_cast<uint64_t>(p[9]) << 8) | (static_cast<uint64_t>(p[10]) << 16) |
                 (static_cast<uint64_t>(p[11]) << 24);
    start = 12;
  } else {
    return bad(absl::StrCat("format version ", major));
  }
  if (start + header_len > size) return bad("truncated header");
  const std::string header(reinterpret_cast<const char*>(p + start), header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([<>|=]?)([uif])(\\d)'"))) {
    return bad(absl::StrCat("no dtype in its header ", header));
  }
  const std::string order = m[1], kind = m[2], width = m[3];
  if (order == ">") return bad("big-endian data");
  if (kind == "u" && width == "2") {
    *type = TokenType::kUint16;
  } else if (kind == "u" && width == "4") {
    *type = TokenType::kUint32;
  } else if (kind == "i" && width == "4") {
    *type = TokenType::kInt32;
  } else if (kind == "i" && width == "8") {
    *type = TokenType::kInt64;
  } else {
    return bad(absl::StrCat("dtype ", kind, width, " (expected uint16, uint32, int32 or int64)"));
  }
  if (header.find("'fortran_order': True") != std::string::npos) return bad("Fortran order");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\((\\d+),?\\s*\\)"))) {
    return bad(absl::StrCat("not one-dimensional: ", header));
  }
  *count = std::stoll(m[1]);
  *offset = start + header_len;
  if (*offset + static_cast<uint64_t>(*count) * Width(*type) > size) {
    return bad(absl::StrCat("the header says ", *count, " tokens, the file holds fewer"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenType> ParseTokenType(const std::string& text) {
  if (text == "uint16") return TokenType::kUint16;
  if (text == "uint32") return TokenType::kUint32;
  return absl::InvalidArgumentError(absl::StrCat(
      "--token-dtype \"", text, "\": expected uint16 or uint32 (a .npy file says its own)"));
}

const char* TokenTypeName(TokenType type) {
  switch (type) {
    case TokenType::kUint16: return "uint16";
    case TokenType::kUint32: return "uint32";
    case TokenType::kInt32: return "int32";
    default: return "int64";
  }
}

bool IsTokenFile(const std::string& path) {
  return absl::EndsWith(path, ".bin") || absl::EndsWith(path, ".npy");
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Open(const std::string& path,
                                                           std::optional<TokenType> type,
                                                           int64_t seq_len) {
  if (seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is a token file: give --seq-len T (the tokens per sample), got ", seq_len));
  }
  const bool npy = absl::EndsWith(path, ".npy");
  if (!npy && !type.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is a flat token file: give --token-dtype uint16 or uint32"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is empty"));
  }
  void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("cannot map ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<TokenFile> f(new TokenFile());
  f->path_ = path;
  f->seq_len_ = seq_len;
  f->bytes_ = static_cast<uint64_t>(st.st_size);
  f->map_ = static_cast<const uint8_t*>(map);
  // Windows are read at random places: no read-ahead beyond them.
  ::madvise(map, f->bytes_, MADV_RANDOM);
  if (npy) {
    HARMONY_RETURN_IF_ERROR(
        ParseNpy(path, f->map_, f->bytes_, &f->type_, &f->tokens_, &f->data_offset_));
  } else {
    f->type_ = *type;
    const int width = Width(f->type_);
    if (f->bytes_ % width != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " holds ", f->bytes_, " bytes, not a whole number of ", TokenTypeName(f->type_),
          " tokens: is --token-dtype right?"));
    }
    f->tokens_ = static_cast<int64_t>(f->bytes_ / width);
  }
  if (f->tokens_ < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " holds ", f->tokens_, " tokens; a sample needs --seq-len + 1 = ", seq_len + 1));
  }
  return f;
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), bytes_);
}

int64_t TokenFile::Start(int64_t index, bool random, uint64_t seed) const {
  if (!random) return (index % windows()) * seq_len_;
  const uint64_t span = static_cast<uint64_t>(tokens_ - seq_len_);  // Starts in [0, span).
  return static_cast<int64_t>(SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(index))) % span);
}

absl::StatusOr<at::Tensor> TokenFile::Window(int64_t start, int64_t vocab) const {
  const int64_t n = seq_len_ + 1;
  if (start < 0 || start + n > tokens_) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": a window of ", n, " tokens at token ", start, " is past its ", tokens_,
        " tokens"));
  }
  const int width = Width(type_);
  const uint8_t* from = map_ + data_offset_ + static_cast<uint64_t>(start) * width;
  HARMONY_ASSIGN_OR_RETURN(at::Tensor out, CallTorch("a token window", [&] {
    return at::empty({n}, at::TensorOptions().dtype(at::kLong));
  }));
  int64_t* to = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = 0;
    switch (type_) {
      case TokenType::kUint16: {
        uint16_t x;
        std::memcpy(&x, from + i * 2, 2);
        v = x;
        break;
      }
      case TokenType::kUint32: {
        uint32_t x;
        std::memcpy(&x, from + i * 4, 4);
        v = x;
        break;
      }
      case TokenType::kInt32: {
        int32_t x;
        std::memcpy(&x, from + i * 4, 4);
        v = x;
        break;
      }
      default:
        std::memcpy(&v, from + i * 8, 8);
    }
    if (v < 0 || (vocab > 0 && v >= vocab)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": token ", start + i, " (byte offset ",
          data_offset_ + static_cast<uint64_t>(start + i) * width, ") is ", v,
          ", outside the model's vocabulary of ", vocab, " (ids 0-", vocab - 1,
          "): is --token-dtype right, or is the file for another tokenizer?"));
    }
    to[i] = v;
  }
  // The copy is made: its pages leave this process's resident memory (the
  // page cache keeps them), with those the kernel mapped around the fault
  // (fault-around: 64 KiB by default), so that resident memory stays flat
  // however much of the file a run reads.
  constexpr uint64_t kAround = 1 << 16;
  const uint64_t begin = (data_offset_ + static_cast<uint64_t>(start) * width) / kAround * kAround;
  const uint64_t end = std::min<uint64_t>(
      bytes_, (data_offset_ + static_cast<uint64_t>(start + n) * width + kAround - 1) / kAround *
                  kAround);
  ::madvise(const_cast<uint8_t*>(map_) + begin, end - begin, MADV_DONTNEED);
  return out;
}

absl::StatusOr<TrainingData> TokenFile::Samples(int64_t first, int64_t count, bool random,
                                                uint64_t seed, int64_t vocab) const {
  std::vector<at::Tensor> windows;
  for (int64_t i = 0; i < count; ++i) {
    HARMONY_ASSIGN_OR_RETURN(at::Tensor w, Window(Start(first + i, random, seed), vocab));
    windows.push_back(std::move(w));
  }
  return CallTorch("token windows", [&] {
    at::Tensor all = at::stack(windows);
    TrainingData d;
    d.inputs = {all.narrow(1, 0, seq_len_).contiguous()};
    d.targets = {all.narrow(1, 1, seq_len_).contiguous()};
    return d;
  });
}

absl::StatusOr<TrainingData> LoadSample(const std::string& path, const std::string& token_dtype,
                                        int64_t seq_len) {
  if (!IsTokenFile(path)) return LoadTrainingData(path);
  std::optional<TokenType> type;
  if (!token_dtype.empty()) {
    HARMONY_ASSIGN_OR_RETURN(type, ParseTokenType(token_dtype));
  }
  HARMONY_ASSIGN_OR_RETURN(std::unique_ptr<TokenFile> file,
                           TokenFile::Open(path, type, seq_len));
  return file->Samples(0, std::min<int64_t>(256, file->windows()), false, 0, 0);
}

}  // namespace harmony::common
