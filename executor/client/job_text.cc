#include "executor/client/job_text.h"

#include <iostream>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/units.h"

namespace harmony::executor {

using common::FormatBytes;

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

std::string StateName(int state) {
  return proto::JobState_Name(static_cast<proto::JobState>(state));
}

bool Ended(int state) {
  return state == proto::SUCCEEDED || state == proto::FAILED ||
         state == proto::CANCELLED;
}

namespace {

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

std::string Clock(const google::protobuf::Timestamp& t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", FromProto(t), absl::LocalTimeZone());
}

std::string Eta(double seconds) {
  return absl::FormatDuration(absl::Seconds(static_cast<int64_t>(seconds + 0.5)));
}

// Swap traffic of the last iteration per second of it.
std::string SwapRate(const proto::Progress& p) {
  if (p.iteration_seconds() <= 0) return "-";
  return common::FormatBandwidth((p.swap_in_bytes() + p.swap_out_bytes()) /
                                         p.iteration_seconds());
}

}  // namespace

std::string ProgressLine(const proto::Progress& p, bool bar) {
  std::string out;
  if (bar) {
    const int width = 24;
    const int filled = p.iterations() > 0 ? width * p.iteration() / p.iterations() : 0;
    out = absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "] ");
  }
  absl::StrAppendFormat(&out, "iteration %d/%d  loss %.4f%s  %.1f samples/s  swap %s%s  ETA %s",
                        p.iteration(), p.iterations(), p.loss(),
                        p.eval_iteration() > 0
                            ? absl::StrFormat("  eval loss %.4f (after %d)", p.eval_loss(),
                                              p.eval_iteration())
                            : "",
                        p.samples_per_s(), SwapRate(p),
                        p.emulated_link() ? " (emulated link)" : "", Eta(p.eta_s()));
  return out;
}

void PrintJob(const proto::Job& j) {
  std::cout << j.id() << (j.name().empty() ? "" : absl::StrCat(" (", j.name(), ")")) << ": "
            << StateName(j.state()) << (j.reason().empty() ? "" : ": ") << j.reason() << "\n";
  std::cout << "  plan: " << j.mode() << " on " << j.num_devices() << " devices of "
            << FormatBytes(j.device_memory_bytes()) << ", host memory "
            << FormatBytes(j.host_memory_bytes()) << "\n";
  std::cout << "  model: " << j.model_path() << " (sha256 " << j.model_sha256().substr(0, 16)
            << "...)\n  data: " << j.data_path()
            << (j.seq_len() > 0 ? absl::StrCat(" (windows of ", j.seq_len(), " + 1 tokens",
                                               j.token_dtype().empty() ? ""
                                                   : absl::StrCat(", ", j.token_dtype()),
                                               ")")
                                : std::string())
            << "\n";
  if (!j.output_path().empty()) std::cout << "  output: " << j.output_path() << "\n";
  if (!j.tensorboard_dir().empty()) {
    std::cout << "  tensorboard: " << j.tensorboard_dir() << " (tensorboard --logdir "
              << j.tensorboard_dir() << ")\n";
  }
  if (!j.checkpoint_path().empty()) {
    std::cout << "  checkpoint: " << j.checkpoint_path() << " (iteration "
              << j.checkpoint_iteration() << ")\n";
  }
  if (j.resumed_from_iteration() >= 0) {
    std::cout << "  resumed from iteration " << j.resumed_from_iteration()
              << (j.resume_from().empty() ? "" : absl::StrCat(" (", j.resume_from(), ")")) << "\n";
  }
  if (j.has_world() && j.world().daemons_size() > 1) {
    const auto& w = j.world();
    std::cout << "  world " << w.world_id() << ": rank " << w.rank() << " of "
              << w.daemons_size() << (j.held() ? ", held until every daemon has admitted it" : "")
              << (w.store().empty() ? "" : absl::StrCat(", store ", w.store()))
              << (w.shard_optimizer_state() ? ", optimizer state sharded" : "") << "\n";
    for (const auto& r : j.ranks()) {
      std::cout << "    rank " << r.rank() << ": " << r.daemon() << " "
                << (r.job_id().empty() ? "?" : r.job_id()) << " ";
      if (!r.unreachable().empty()) {
        std::cout << "unreachable: " << r.unreachable() << "\n";
      } else {
        std::cout << StateName(r.state()) << ", iteration " << r.iteration()
                  << (r.reason().empty() ? "" : absl::StrCat(": ", r.reason())) << "\n";
      }
    }
  }
  if (!j.kept_model_path().empty()) {
    std::cout << "  trained model kept at: " << j.kept_model_path() << "\n";
  }
  const auto& o = j.optimizer();
  std::cout << "  optimizer: " << absl::AsciiStrToLower(proto::OptimizerKind_Name(o.kind()))
            << ", lr " << o.learning_rate() << ", " << j.iterations() << " iterations";
  if (!j.devices().empty()) {
    std::cout << ", devices " << absl::StrJoin(j.devices(), ",");
  }
  if (j.bf16()) std::cout << ", bf16";
  if (j.has_flush_denormal()) {
    std::cout << ", denormals " << (j.flush_denormal() ? "flushed to zero" : "computed");
  }
  std::cout << "\n";
  if (!o.lr_schedule().empty() && o.lr_schedule() != "constant") {
    std::cout << "  schedule: " << o.lr_schedule() << ", warm-up " << o.warmup_iterations()
              << ", decay " << o.decay_iterations() << ", min lr " << o.min_lr() << "\n";
  }
  if (o.clip_grad_norm() > 0) {
    std::cout << "  clip grad norm: " << o.clip_grad_norm() << " (" << o.clip_mode() << ")\n";
  }
  if (!o.no_decay().empty()) {
    std::cout << "  no weight decay: " << o.no_decay()
              << (o.no_decay_embeddings() ? ", embeddings" : "") << "\n";
  }
  if (!o.eval_data_path().empty()) {
    std::cout << "  validation: " << o.eval_data_path() << ", "
              << (o.eval_iterations() > 0 ? absl::StrCat(o.eval_iterations(), " minibatches")
                                          : std::string("every whole minibatch"))
              << (o.eval_every() > 0 ? absl::StrCat(", after every ", o.eval_every(),
                                                    " iterations and at the end")
                                     : std::string(", at the end"))
              << "\n";
  }
  if (j.has_progress()) std::cout << "  progress: " << ProgressLine(j.progress(), false) << "\n";
  std::cout << "  history:\n";
  for (const auto& c : j.history()) {
    std::cout << "    " << Clock(c.time()) << "  " << StateName(c.state())
              << (c.reason().empty() ? "" : "  ") << c.reason() << "\n";
  }
}

void PrintList(const std::vector<proto::Job>& jobs) {
  if (jobs.empty()) {
    std::cout << "no jobs\n";
    return;
  }
  std::cout << absl::StrFormat("%-9s %-12s %-10s %-11s %-9s %-8s %-19s %s\n", "JOB", "NAME",
                               "STATE", "ITERATION", "LOSS", "DEVICES", "SUBMITTED", "REASON");
  for (const auto& j : jobs) {
    std::string reason = j.reason();
    if (reason.size() > 60) reason = reason.substr(0, 57) + "...";
    std::cout << absl::StrFormat(
        "%-9s %-12s %-10s %-11s %-9s %-8s %-19s %s\n", j.id(), j.name().substr(0, 12),
        StateName(j.state()),
        j.has_progress() ? absl::StrCat(j.progress().iteration(), "/", j.iterations())
                         : absl::StrCat("0/", j.iterations()),
        j.has_progress() ? absl::StrFormat("%.4f", j.progress().loss()) : "-",
        j.devices().empty() ? "-" : absl::StrJoin(j.devices(), ","), Clock(j.submitted_at()),
        reason);
  }
}

void PrintDevices(const proto::GetDevicesResponse& d) {
  for (const auto& dev : d.devices()) {
    std::cout << absl::StrFormat("%-7s %10s used of %-10s %s\n", dev.name(),
                                 FormatBytes(dev.used_bytes()), FormatBytes(dev.memory_bytes()),
                                 dev.job_id().empty() ? "free" : dev.job_id());
  }
  std::cout << "host: " << FormatBytes(d.host_reserved_bytes()) << " reserved by running jobs of "
            << FormatBytes(d.host_memory_bytes()) << "\n";
}

// status, list, watch, logs, cancel, devices.
}  // namespace harmony::executor
