// What the kernel says about host memory (/proc), and SplitMix64, the
// hash the runtime's seeded streams are drawn from.
//
// Thread-safety: pure functions.

#ifndef HARMONY_COMMON_HOST_MEMORY_H_
#define HARMONY_COMMON_HOST_MEMORY_H_

#include <cstdint>

namespace harmony::common {

// MemAvailable from /proc/meminfo, in bytes; 0 when unknown.
uint64_t AvailableHostMemory();

// This process's peak resident memory (VmHWM), in bytes; 0 when unknown.
uint64_t PeakResidentBytes();

// SplitMix64's finaliser: the dropout stream, the shuffled order and a
// token file's random windows are drawn from it.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace harmony::common

#endif  // HARMONY_COMMON_HOST_MEMORY_H_
