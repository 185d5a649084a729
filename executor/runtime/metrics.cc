#include "executor/runtime/metrics.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace harmony::executor {

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

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
        {"kept_out", m.bytes.kept_out},
        {"kept_in", m.bytes.kept_in},
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
      {"peer_wait_s", m.peer_wait_s},
      {"device_compute_s", m.device_compute_s},
      {"optimizer_s", m.optimizer_s},
      {"host_sums", {{"seconds", m.host_sum_s}, {"early_bytes", m.host_sum_early_bytes}}},
      {"host_link",
       {{"to_device_bytes", m.to_device_link_bytes},
        {"to_device_busy_s", m.to_device_busy_s},
        {"to_host_bytes", m.to_host_link_bytes},
        {"to_host_busy_s", m.to_host_busy_s}}},
      {"emulated_host_link", m.emulated_link},
      {"lr", m.learning_rate},
  };
  if (m.emulated_link) {
    nlohmann::json& link = j["host_link"];
    link["to_device_copies"] = m.to_device_copies;
    link["to_device_late_s"] = m.to_device_late_s;
    link["to_device_late_max_s"] = m.to_device_late_max_s;
    link["to_host_copies"] = m.to_host_copies;
    link["to_host_late_s"] = m.to_host_late_s;
    link["to_host_late_max_s"] = m.to_host_late_max_s;
  }
  if (m.clipping) {
    j["grad_norm"] = m.grad_norm;
    j["clip"] = {{"coef", m.clip_coef},
                 {"speculated_vlayers", m.speculated_vlayers},
                 {"redone", m.redone},
                 {"redo_s", m.redo_s},
                 {"mode", m.clip_mode}};
  }
  if (m.evaluated) {
    j["eval"] = {{"loss", m.eval.loss},
                 {"minibatches", m.eval.minibatches},
                 {"samples", m.eval.samples},
                 {"seconds", m.eval.seconds},
                 {"weights_in", m.eval.weights_in}};
  }
  if (!m.checkpoint_path.empty()) {
    j["checkpoint"] = {{"path", m.checkpoint_path}, {"copy_s", m.checkpoint_copy_s}};
  }
  if (!m.checkpoint_written_path.empty()) {
    j["checkpoint_written"] = {{"path", m.checkpoint_written_path},
                               {"write_s", m.checkpoint_write_s}};
  }
  return j.dump();
}

void IterationCounters::AddCompute(int d, double seconds) {
  AddSeconds(compute_ns, seconds);
  if (d >= 0 && d < static_cast<int>(device_compute_ns_.size())) {
    AddSeconds(device_compute_ns_[d], seconds);
  }
}

void IterationCounters::Reset(int devices) {
  if (static_cast<int>(device_compute_ns_.size()) != devices) {
    device_compute_ns_ = std::vector<std::atomic<int64_t>>(std::max(devices, 0));
  }
  for (std::atomic<int64_t>& c : device_compute_ns_) c = 0;
  for (std::atomic<uint64_t>* c : {&weights_in, &gradients_out, &activations_in, &activations_out,
                                   &stash_out, &stash_in, &kept_out, &kept_in, &peer, &data_in,
                                   &targets_in}) {
    *c = 0;
  }
  compute_ns = 0;
  wait_ns = 0;
  optimizer_ns = 0;
  peer_wait_ns = 0;
  host_sum_ns = 0;
  host_sum_early = 0;
}

void IterationCounters::Fill(IterationMetrics& out) const {
  out.bytes.weights_in = weights_in;
  out.bytes.gradients_out = gradients_out;
  out.bytes.activations_in = activations_in;
  out.bytes.activations_out = activations_out;
  out.bytes.stash_out = stash_out;
  out.bytes.stash_in = stash_in;
  out.bytes.kept_out = kept_out;
  out.bytes.kept_in = kept_in;
  out.bytes.peer = peer;
  out.bytes.data_in = data_in;
  out.bytes.targets_in = targets_in;
  out.compute_s = compute_ns * 1e-9;
  out.swap_wait_s = wait_ns * 1e-9;
  out.peer_wait_s = peer_wait_ns * 1e-9;
  out.device_compute_s.clear();
  for (const std::atomic<int64_t>& c : device_compute_ns_) out.device_compute_s.push_back(c * 1e-9);
  out.optimizer_s = optimizer_ns * 1e-9;
  out.host_sum_s = host_sum_ns * 1e-9;
  out.host_sum_early_bytes = host_sum_early;
}

ComputeCheck CheckComputeAgainstPlan(std::vector<double> compute_s, double planned_s,
                                     bool gpu) {
  ComputeCheck c;
  if (!(planned_s > 0) || compute_s.empty()) return c;
  if (compute_s.size() > 1) compute_s.erase(compute_s.begin());
  const size_t n = compute_s.size();
  c.measured_s = Median(std::move(compute_s));
  c.planned_s = planned_s;
  c.ratio = c.measured_s / planned_s;
  c.off = c.ratio > 2 || c.ratio < 0.5;
  c.text = absl::StrFormat(
      "device compute per iteration: %.4g s measured (median of %d), %.2fx the plan's %.4g s",
      c.measured_s, static_cast<int>(n), c.ratio, planned_s);
  if (c.off) {
    c.text += absl::StrFormat(
        "\nwarning: the devices computed at %.2fx the speed the plan was profiled at, so its "
        "schedule may not be the best here. Usual causes: ",
        1 / c.ratio);
    // A GPU's kernels take no denormal slow path; its partitions share one
    // GPU's compute (the sums above count each partition's time).
    c.text += gpu ? "a profile made on another GPU or on the CPU, partitions of one GPU "
                    "computing side by side more or less than the profile timed them, or other "
                    "work on the GPU; re-profile with harmony-plan profile --devices set as you "
                    "train"
                  : "denormal numbers computed (not flushed) on a CPU that is slow at them (try "
                    "--flush-denormal on), another CPU or thread count than the profile's, or "
                    "other load on the machine; re-profile with harmony-plan on this machine "
                    "under the policy you train with";
  }
  return c;
}

IterationBalance BalanceOf(const IterationMetrics& m) {
  IterationBalance b;
  const std::vector<double>& d = m.device_compute_s;
  if (d.size() < 2) return b;
  const double mean = std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(d.size());
  if (mean > 0) b.slowest_over_mean = *std::max_element(d.begin(), d.end()) / mean;
  const double busy = m.compute_s + m.swap_wait_s;
  if (busy > 0) b.peer_wait_share = m.peer_wait_s / busy;
  return b;
}

BalanceCheck CheckDeviceBalance(std::vector<IterationBalance> iterations) {
  BalanceCheck c;
  if (iterations.size() > 1) iterations.erase(iterations.begin());
  std::vector<double> slowest, waits;
  for (const IterationBalance& b : iterations) {
    if (!(b.slowest_over_mean > 0)) continue;
    slowest.push_back(b.slowest_over_mean);
    waits.push_back(b.peer_wait_share);
  }
  if (slowest.empty()) return c;
  c.slowest_over_mean = Median(slowest);
  c.peer_wait_share = Median(waits);
  c.text = absl::StrFormat(
      "device balance: the slowest device computed %.2fx the devices' mean per iteration, and "
      "they waited for each other %.1f%% of their time (medians of %d; vDP reductions and "
      "weights shared between devices run them in step)",
      c.slowest_over_mean, 100 * c.peer_wait_share, static_cast<int>(slowest.size()));
  return c;
}

LinkLateness LatenessOf(const IterationMetrics& m) {
  LinkLateness l;
  if (!m.emulated_link) return l;
  l.copies = m.to_device_copies + m.to_host_copies;
  l.in_s = m.to_device_late_s;
  l.in_max_s = m.to_device_late_max_s;
  l.out_s = m.to_host_late_s;
  l.out_max_s = m.to_host_late_max_s;
  return l;
}

LinkLateness CheckLinkLateness(std::vector<LinkLateness> iterations) {
  LinkLateness c;
  if (iterations.size() > 1) iterations.erase(iterations.begin());
  std::vector<double> copies, in, in_max, out, out_max;
  for (const LinkLateness& l : iterations) {
    if (l.copies == 0) continue;
    copies.push_back(static_cast<double>(l.copies));
    in.push_back(l.in_s);
    in_max.push_back(l.in_max_s);
    out.push_back(l.out_s);
    out_max.push_back(l.out_max_s);
  }
  if (copies.empty()) return c;
  c.copies = static_cast<int64_t>(Median(copies));
  c.in_s = Median(in);
  c.in_max_s = Median(in_max);
  c.out_s = Median(out);
  c.out_max_s = Median(out_max);
  c.text = absl::StrFormat(
      "emulated link: its %d copies per iteration came back %.1f ms late in all going in "
      "(the latest %.2f ms), %.1f ms going out (%.2f ms) (medians of %d): the devices' copies "
      "held past their ends on the link, beyond which a plan prices a fixed cost per transfer "
      "(harmony-plan --host-link-latency; copy threads waking late on cores the compute "
      "fills, or copies slower than the link)",
      static_cast<int>(c.copies), 1e3 * c.in_s, 1e3 * c.in_max_s, 1e3 * c.out_s,
      1e3 * c.out_max_s, static_cast<int>(copies.size()));
  return c;
}

}  // namespace harmony::executor
