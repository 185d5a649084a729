#include "executor/runtime/metrics.h"

#include "nlohmann/json.hpp"

namespace harmony::executor {

std::string MetricsJson(const IterationMetrics& m) {
  nlohmann::json j = {
      {"iteration", m.iteration},
      {"loss", m.loss},
      {"seconds", m.seconds},
      {"samples_per_s", m.samples_per_s},
      {"bytes",
       {{"weights_in", m.bytes.weights_in},
        {"gradients_out", m.bytes.gradients_out},
        {"activations_in", m.bytes.activations_in},
        {"activations_out", m.bytes.activations_out},
        {"stash_out", m.bytes.stash_out},
        {"stash_in", m.bytes.stash_in},
        {"peer", m.bytes.peer},
        {"data_in", m.bytes.data_in},
        {"targets_in", m.bytes.targets_in},
        {"to_device", m.bytes.to_device()},
        {"to_host", m.bytes.to_host()}}},
      {"device_peak_bytes", m.device_peak_bytes},
      {"device_peak_activity", m.device_peak_activity},
      {"device_allocations", m.device_allocations},
      {"device_reused", m.device_reused},
      {"compute_s", m.compute_s},
      {"swap_wait_s", m.swap_wait_s},
      {"optimizer_s", m.optimizer_s},
      {"emulated_host_link", m.emulated_link},
  };
  if (!m.checkpoint_path.empty()) {
    j["checkpoint"] = {{"path", m.checkpoint_path}, {"copy_s", m.checkpoint_copy_s}};
  }
  if (!m.checkpoint_written_path.empty()) {
    j["checkpoint_written"] = {{"path", m.checkpoint_written_path},
                               {"write_s", m.checkpoint_write_s}};
  }
  return j.dump();
}

}  // namespace harmony::executor
