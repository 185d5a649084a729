#include "planner/profile/machine.h"

#include <dlfcn.h>

#include <future>

#include <atomic>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "common/device_memory.h"
#include "common/precise_sleep.h"
#include "common/torch_status.h"

namespace harmony::planner {
namespace machine {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace machine

using common::DeviceMemory;
using common::DeviceMemoryScope;
using machine::Median;
using machine::Now;

absl::StatusOr<proto::Bandwidths> MeasureBandwidths(const common::DeviceSpec& spec, int repeats) {
  const int64_t elements =
      static_cast<int64_t>(std::min<uint64_t>(64ull << 20, spec.capacity / 4) / 4);
  proto::Bandwidths bw;
  if (elements < 1024) return bw;
  const double bytes = static_cast<double>(elements) * 4;
  return common::CallTorch("measuring copy bandwidth", [&] {
    std::vector<std::unique_ptr<DeviceMemory>> devices;
    std::vector<at::Tensor> host, device;
    for (int i = 0; i < std::max(spec.count, 1); ++i) {
      devices.push_back(std::make_unique<DeviceMemory>(absl::StrCat("cpu:", i),
                                                       spec.capacity));
      host.push_back(at::rand({elements}));
      DeviceMemoryScope scope(devices.back().get());
      device.push_back(at::empty({elements}));
    }
    auto time = [&](const std::function<void()>& fn) {
      fn();
      std::vector<double> t;
      for (int r = 0; r < std::max(repeats, 1); ++r) {
        const double start = Now();
        fn();
        t.push_back(Now() - start);
      }
      return Median(t);
    };
    bw.set_host_to_device_bytes_per_s(bytes / time([&] { device[0].copy_(host[0]); }));
    bw.set_device_to_host_bytes_per_s(bytes / time([&] { host[0].copy_(device[0]); }));
    // All devices at once, each copying from a thread of its own that lives
    // across the measurements, as the runtime's device threads do. (A fresh
    // thread per copy timed the start of its OpenMP team too: 0.4-0.8 GB/s
    // "for all devices" against 60 GB/s for one.)
    const size_t n = device.size();
    std::mutex mu;
    std::condition_variable cv;
    int round = 0;
    size_t done = 0;
    bool stop = false;
    std::vector<std::thread> copiers;
    for (size_t i = 0; i < n; ++i) {
      copiers.emplace_back([&, i] {
        int seen = 0;
        while (true) {
          {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return stop || round != seen; });
            if (stop) return;
            seen = round;
          }
          device[i].copy_(host[i]);
          std::lock_guard<std::mutex> lock(mu);
          if (++done == n) cv.notify_all();
        }
      });
    }
    const double all = time([&] {
      std::unique_lock<std::mutex> lock(mu);
      done = 0;
      ++round;
      cv.notify_all();
      cv.wait(lock, [&] { return done == n; });
    });
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (std::thread& t : copiers) t.join();
    bw.set_host_link_all_devices_bytes_per_s(bytes * n / all);
    // A transfer's hand-off to its copy thread and back, while the other
    // devices compute.
    bw.set_transfer_latency_s(MeasureHandoff(static_cast<int>(n) - 1, 0, 200));
    bw.set_sleep_overshoot_s(std::max(
        0.0, MeasureHandoff(static_cast<int>(n) - 1, 1e-4, 200) - bw.transfer_latency_s()));
    if (n > 1) {
      bw.set_peer_bytes_per_s(bytes / time([&] { device[1].copy_(device[0]); }));
    }
    return bw;
  });
}

double MeasureHandoff(int busy, double worker_sleep_s, int repeats) {
  std::atomic<bool> stop{false};
  // Neighbours compute in short slices, as devices' compute threads do.
  auto spin = [](double seconds) {
    const double end = Now() + seconds;
    volatile double x = 1;
    while (Now() < end) {
      for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
    }
  };
  std::vector<std::thread> neighbours;
  for (int i = 0; i < busy; ++i) {
    neighbours.emplace_back([&] {
      while (!stop) spin(1e-3);
    });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> work;
  bool quit = false;
  std::thread worker([&] {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return quit || work != nullptr; });
      if (quit) return;
      std::function<void()> w = std::move(work);
      work = nullptr;
      lock.unlock();
      w();
      lock.lock();
    }
  });
  std::vector<double> t;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    spin(5e-4);  // Some compute between hand-offs, as a task has.
    std::promise<void> done;
    std::future<void> f = done.get_future();
    const double start = Now();
    {
      std::lock_guard<std::mutex> lock(mu);
      work = [&] {
        // As the emulated link's copies sleep (host_link.cc).
        common::PreciseSleepFor(worker_sleep_s);
        done.set_value();
      };
    }
    cv.notify_all();
    f.get();
    t.push_back(std::max(0.0, Now() - start - worker_sleep_s));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    quit = true;
  }
  cv.notify_all();
  worker.join();
  stop = true;
  for (std::thread& n : neighbours) n.join();
  return Median(t);
}

absl::StatusOr<double> MeasureGemmRate(int repeats) {
  constexpr int64_t kN = 1024;
  return common::CallTorch("measuring the matrix multiply rate", [&] {
    at::Tensor a = at::randn({kN, kN});
    at::Tensor b = at::randn({kN, kN});
    at::Tensor c = at::empty({kN, kN});
    at::mm_out(c, a, b);  // Warm-up.
    std::vector<double> times;
    for (int r = 0; r < std::max(repeats, 3); ++r) {
      const double start = Now();
      at::mm_out(c, a, b);
      times.push_back(Now() - start);
    }
    return 2.0 * kN * kN * kN / Median(times);
  });
}

std::string GemmWarning(double flop_per_s, int host_threads) {
  const double floor = kSlowGemmPerCorePair * std::max(1, host_threads / 2);
  if (flop_per_s <= 0 || flop_per_s >= floor) return "";
  return absl::StrFormat(
      "warning: matrix multiplies run at %.1f GFLOP/s, below %.0f GFLOP/s (%.0f per pair of "
      "this machine's %d hardware threads): LibTorch's libblas.so.3 is likely the reference "
      "BLAS. Install libopenblas0-openmp (scripts/setup.sh does; Debian's alternatives then "
      "point libblas.so.3 at it) and profile again: times measured on a slow BLAS make the "
      "plan's estimates wrong.\n",
      flop_per_s / 1e9, floor / 1e9, kSlowGemmPerCorePair / 1e9, host_threads);
}

std::string BlasCoreHintFor(const std::string& core, bool cpu_has_avx512, const char* coretype) {
  if (core.empty() || !cpu_has_avx512) return "";
  const std::string lower = absl::AsciiStrToLower(core);
  for (const char* wide : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (lower == wide) return "";
  }
  const std::string speed =
      "fp32 matrix multiplies ran 1.9x as fast with them on an AMD EPYC (Zen 5). Profile and "
      "train under the same setting (and run your reference loops under it, for like results).";
  if (coretype != nullptr) {
    return absl::StrFormat(
        "note: OPENBLAS_CORETYPE=%s holds OpenBLAS to its %s kernels on this CPU, which has "
        "AVX-512; without the variable OpenBLAS picks its AVX-512 kernels: %s\n",
        coretype, core, speed);
  }
  return absl::StrFormat(
      "note: OpenBLAS took this CPU, which has AVX-512, for %s; OPENBLAS_CORETYPE=SKYLAKEX "
      "runs its AVX-512 kernels: %s\n",
      core, speed);
}

std::string BlasCoreHint() {
  using CoreName = char* (*)();
  // Present when libblas.so.3 is OpenBLAS (Debian's alternatives).
  auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* core = corename != nullptr ? corename() : nullptr;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return BlasCoreHintFor(core != nullptr ? core : "", avx512, std::getenv("OPENBLAS_CORETYPE"));
}

}  // namespace harmony::planner
