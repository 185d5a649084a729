#include "common/denormals.h"

#include <fstream>

#include <omp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define HARMONY_HAS_MXCSR 1
#endif

namespace harmony::common {
namespace {

#ifdef HARMONY_HAS_MXCSR
constexpr unsigned kFlushToZero = 0x8000;      // FTZ: denormal results become 0.
constexpr unsigned kDenormalsAreZero = 0x0040;  // DAZ: denormal inputs read as 0.
#endif

}  // namespace

bool SetCallingThreadFlushDenormal(bool flush) {
#ifdef HARMONY_HAS_MXCSR
  const unsigned bits = kFlushToZero | kDenormalsAreZero;
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(flush ? (csr | bits) : (csr & ~bits));
  return true;
#else
  (void)flush;
  return false;
#endif
}

bool CallingThreadFlushesDenormal() {
#ifdef HARMONY_HAS_MXCSR
  const unsigned bits = kFlushToZero | kDenormalsAreZero;
  return (_mm_getcsr() & bits) == bits;
#else
  return false;
#endif
}

void ApplyFlushDenormal(bool flush) {
  SetCallingThreadFlushDenormal(flush);
  // Every member of the calling thread's OpenMP team (LibTorch's intra-op
  // threads, at the calling thread's count) sets its own register.
  // (at::parallel_for would run inline here: its OpenMP loop is a template
  // compiled without -fopenmp in this file's users.)
#pragma omp parallel num_threads(omp_get_max_threads())
  SetCallingThreadFlushDenormal(flush);
}

ScopedFlushDenormal::ScopedFlushDenormal(bool flush) : saved_(CallingThreadFlushesDenormal()) {
  ApplyFlushDenormal(flush);
}

ScopedFlushDenormal::~ScopedFlushDenormal() { ApplyFlushDenormal(saved_); }

std::string FlushDenormalName(bool flush) { return flush ? "on" : "off"; }

absl::StatusOr<bool> ParseFlushDenormal(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "on" || t == "true" || t == "1" || t == "yes") return true;
  if (t == "off" || t == "false" || t == "0" || t == "no") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "--flush-denormal takes on (flush denormal floats to zero: FTZ and DAZ) or off "
      "(compute on them, PyTorch's default), not \"", text, "\""));
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return "unknown";
}

}  // namespace harmony::common
