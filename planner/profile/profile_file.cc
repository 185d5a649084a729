// The profile file (harmony-plan profile --profile-out): written and read
// as JSON, and the summary table printed after profiling. profiler.h.

#include "planner/profile/profiler.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "common/status.h"
#include "common/units.h"
#include "google/protobuf/util/json_util.h"
#include "planner/profile/machine.h"

namespace harmony::planner {

absl::Status WriteProfileFile(const std::string& path, const proto::ProfileFile& profile) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(profile, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("writing ", path, ": ",
                                            status.message().as_string()));
  }
  return common::WriteFileAtomically(path, json);
}

absl::StatusOr<proto::ProfileFile> ReadProfileFile(const std::string& path) {
  HARMONY_ASSIGN_OR_RETURN(std::string json, common::ReadFileToString(path));
  proto::ProfileFile profile;
  auto status = google::protobuf::util::JsonStringToMessage(json, &profile);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a Harmony profile: ", status.message().as_string()));
  }
  if (profile.schema_version() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a Harmony profile: schema_version is missing"));
  }
  if (profile.schema_version() > kProfileSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": profile schema version ", profile.schema_version(),
        " is newer than this build supports (", kProfileSchemaVersion, ")"));
  }
  return profile;
}

std::string ProfileSummary(const proto::ProfileFile& file) {
  const proto::Profile& p = file.profile();
  std::string out;
  if (!file.model().loss_output_note().empty()) {
    absl::StrAppend(&out, "loss: ", file.model().loss_output_note(), "\n");
  }
  absl::StrAppendFormat(&out,
      "%-6s %-24s %10s %10s %10s %10s %10s %10s %10s\n", "vLayer", "scope",
      "params", "act in", "act out", "fwd ms", "bwd ms", "fwd peak", "bwd peak");
  const auto& vlayers = file.model().decomposition().vlayers();
  for (const proto::VLayerProfile& v : p.vlayers()) {
    // The largest size whose backward fits (else the largest profiled).
    const proto::MicrobatchProfile* row = nullptr;
    for (const auto& m : v.by_microbatch()) {
      if (m.backward_fits()) row = &m;
    }
    if (row == nullptr && v.by_microbatch_size() > 0) row = &v.by_microbatch(0);
    uint64_t in = 0, act_out = 0;
    if (row != nullptr) {
      for (const auto& t : row->inputs()) in += t.bytes();
      for (const auto& t : row->outputs()) act_out += t.bytes();
    }
    std::string scope = static_cast<int>(v.vlayer()) < vlayers.size()
                            ? vlayers[v.vlayer()].scope()
                            : "";
    if (scope.empty()) scope = "-";
    absl::StrAppendFormat(
        &out, "%-6d %-24s %10s %10s %10s %10.3f %10.3f %10s %10s\n", v.vlayer(),
        scope.substr(0, 24), common::FormatBytes(v.parameter_bytes()),
        common::FormatBytes(in), common::FormatBytes(act_out),
        row ? row->forward_time_s() * 1e3 : 0.0,
        row ? row->backward_time_s() * 1e3 : 0.0,
        common::FormatBytes(row ? row->forward_peak_bytes() : 0),
        common::FormatBytes(row ? row->backward_peak_bytes() : 0));
  }
  absl::StrAppendFormat(
      &out,
      "microbatch sizes: forward up to %d, backward up to %d (of %s per "
      "device); times and peaks above at the largest backward size\n",
      p.max_forward_microbatch(), p.max_backward_microbatch(),
      common::FormatBytes(p.device_memory_bytes()));
  const proto::Bandwidths& bw = p.bandwidths();
  absl::StrAppendFormat(
      &out,
      "copy bandwidth (%s): host->device %s, device->host %s, all %d devices "
      "at once %s, device->device %s\n",
      p.device_name(), common::FormatBandwidth(bw.host_to_device_bytes_per_s()),
      common::FormatBandwidth(bw.device_to_host_bytes_per_s()), p.num_devices(),
      common::FormatBandwidth(bw.host_link_all_devices_bytes_per_s()),
      common::FormatBandwidth(bw.peer_bytes_per_s()));
  if (bw.both_directions_bytes_per_s() > 0) {
    absl::StrAppendFormat(&out, "both directions at once: %s each way\n",
                          common::FormatBandwidth(bw.both_directions_bytes_per_s()));
  }
  if (bw.transfer_latency_s() > 0 || bw.sleep_overshoot_s() > 0) {
    absl::StrAppendFormat(
        &out,
        "each transfer's hand-off to its copy thread: %s; an emulated link's copy also "
        "oversleeps by %s (plan for harmony-exec --emulate-host-link with harmony-plan "
        "--host-link-latency %s)\n",
        common::FormatTimeSpan(absl::Seconds(bw.transfer_latency_s())),
        common::FormatTimeSpan(absl::Seconds(bw.sleep_overshoot_s())),
        common::FormatTimeSpan(absl::Seconds(bw.transfer_latency_s() + bw.sleep_overshoot_s())));
  }
  if (p.gemm_flop_per_s() > 0) {
    absl::StrAppendFormat(&out, "matrix multiply: %.1f GFLOP/s (fp32 1024^3, %d thread(s))\n",
                          p.gemm_flop_per_s() / 1e9, p.gemm_threads());
    absl::StrAppend(&out, GemmWarning(p.gemm_flop_per_s(), static_cast<int>(p.host_threads())));
  }
  // The planner's times (forward_time_s, backward_time_s) against another
  // measurement of the same vLayers: Σ other ÷ Σ planner's over the rows
  // where the other was measured; 0 where none was.
  using Time = double (proto::MicrobatchProfile::*)() const;
  auto ratio = [&p](Time planner, Time other) {
    double mine = 0, theirs = 0;
    for (const proto::VLayerProfile& v : p.vlayers()) {
      for (const proto::MicrobatchProfile& m : v.by_microbatch()) {
        if ((m.*other)() <= 0) continue;
        mine += (m.*planner)();
        theirs += (m.*other)();
      }
    }
    return mine > 0 ? theirs / mine : 0.0;
  };
  using M = proto::MicrobatchProfile;
  // In turn against over and over (what older profiles timed), and
  // how much slower the devices compute side by side (they share the cores).
  const double one_f = ratio(&M::forward_time_s, &M::forward_time_one_s);
  const double one_b = ratio(&M::backward_time_s, &M::backward_time_one_s);
  const double busy_f = ratio(&M::forward_time_s, &M::forward_time_busy_s);
  const double busy_b = ratio(&M::backward_time_s, &M::backward_time_busy_s);
  if (one_f > 0 && one_b > 0) {
    absl::StrAppendFormat(&out,
                          "vLayers timed in turn, weights copied in by another thread: forward "
                          "%.2fx, backward %.2fx the time of one vLayer run over and over\n",
                          1 / one_f, 1 / one_b);
  }
  if (busy_f > 0 && busy_b > 0) {
    absl::StrAppendFormat(&out,
                          "computing beside %d other busy device(s): forward %.2fx, backward "
                          "%.2fx the time alone (the simulator uses these while the others "
                          "compute)\n",
                          p.num_devices() - 1, busy_f, busy_b);
  }
  // The chained factors and the step hand-off, the same for every vLayer
  // of a size.
  std::map<uint32_t, std::pair<double, double>> chained;
  std::map<uint32_t, double> handoff;
  for (const proto::VLayerProfile& v : p.vlayers()) {
    for (const M& m : v.by_microbatch()) {
      auto& [f, b] = chained[m.size()];
      f = std::max(f, m.forward_chained());
      b = std::max(b, m.backward_chained());
      handoff[m.size()] = std::max(handoff[m.size()], m.step_handoff_s());
    }
  }
  std::string sizes;
  for (const auto& [size, fb] : chained) {
    if (fb.first <= 0 && fb.second <= 0) continue;
    absl::StrAppendFormat(&sizes, "%s%u: %.2fx, %.2fx", sizes.empty() ? "" : "; ", size,
                          fb.first, fb.second);
  }
  if (!sizes.empty()) {
    absl::StrAppend(&out, "a task's later vLayers, forward and backward (pairs timed as one "
                          "task), at microbatch ", sizes, " their time in turn (the simulator "
                          "prices a pack's second and later vLayers so)\n");
  }
  std::string handoffs;
  for (const auto& [size, seconds] : handoff) {
    if (seconds <= 0) continue;
    absl::StrAppendFormat(&handoffs, "%s%u: %s", handoffs.empty() ? "" : "; ", size,
                          common::FormatTimeSpan(absl::Seconds(seconds)));
  }
  if (!handoffs.empty()) {
    absl::StrAppend(&out, "a device's compute thread between two steps (what one made posted "
                          "to its copy thread, the next taken), at microbatch ", handoffs,
                          " (the simulator starts each compute so much later)\n");
  }
  return out;
}

}  // namespace harmony::planner
