#include "common/host_memory.h"

#include <fstream>
#include <string>

namespace harmony::common {
namespace {

// The value of `key` ("MemAvailable:") in a /proc file of "key value kB"
// lines, in bytes; 0 when absent.
uint64_t ProcKib(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  while (in >> name) {
    if (name == key) {
      uint64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    std::getline(in, name);
  }
  return 0;
}

}  // namespace

uint64_t AvailableHostMemory() { return ProcKib("/proc/meminfo", "MemAvailable:"); }

uint64_t PeakResidentBytes() { return ProcKib("/proc/self/status", "VmHWM:"); }

}  // namespace harmony::common
