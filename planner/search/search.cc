#include "planner/search/search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/units.h"
#include "planner/search/candidates.h"
#include "planner/search/fit_retries.h"
#include "planner/search/keep_choice.h"
#include "planner/search/merge_choice.h"
#include "planner/search/microbatch_choice.h"
#include "planner/search/prefetch_choice.h"

namespace harmony::planner {
namespace {

// Powers of two up to `limit`, and `limit` itself.
std::vector<int> Sizes(int from, int limit) {
  std::vector<int> out;
  for (int u = from; u <= limit; u *= 2) out.push_back(u);
  if (limit >= from && (out.empty() || out.back() != limit)) out.push_back(limit);
  return out;
}

void AddUnique(std::vector<Packing>& packings, const Packing& p) {
  if (std::find(packings.begin(), packings.end(), p) == packings.end()) packings.push_back(p);
}

int TotalPacks(const Config& c) {
  return static_cast<int>(c.forward_packs.size() + c.backward_packs.size());
}

}  // namespace

// Adds each pack's compute at the microbatch sizes the tasks run.
double BusiestDeviceComputeSeconds(const CostModel& model, const Config& c) {
  // `at(size)` over `samples` in microbatches of `u` (the last may be smaller).
  auto over = [](int samples, int u, const auto& at) {
    const int full = samples / u, rest = samples % u;
    return full * at(u) + (rest > 0 ? at(rest) : 0.0);
  };
  const int n = std::max(1, c.num_devices);
  const int samples = c.mode == Mode::kVdp ? (c.minibatch + n - 1) / n : c.minibatch;
  double seconds = 0;
  for (const PackRange& p : c.forward_packs) {
    seconds += over(samples, c.forward_microbatch,
                    [&](int size) { return model.ForwardSeconds(p.begin, p.end, size); });
  }
  for (size_t q = 0; q < c.backward_packs.size(); ++q) {
    const PackRange& p = c.backward_packs[q];
    // Kept packs' backwards run without their recompute.
    const bool kept = c.Keeps(static_cast<int>(q));
    seconds += over(samples, c.BackwardMicrobatch(static_cast<int>(q)), [&](int size) {
      return kept ? model.KeptBackwardSeconds(p.begin, p.end, size)
                  : model.BackwardSeconds(p.begin, p.end, size);
    });
  }
  return c.mode == Mode::kVdp ? seconds : seconds / n;
}

absl::StatusOr<SearchResult> SearchSchedule(const CostModel& model,
                                            const SearchOptions& o) {
  if (o.minibatch < 1) return absl::InvalidArgumentError("the minibatch must be at least 1");
  if (o.num_devices < 1) return absl::InvalidArgumentError("at least one device is needed");
  if (o.device_memory == 0) return absl::InvalidArgumentError("the device memory is 0");
  std::vector<Mode> modes;
  if (o.mode) {
    modes.push_back(*o.mode);
  } else {
    modes = {Mode::kVpp, Mode::kVdp};
  }
  if (o.mode == Mode::kVdp && o.minibatch < o.num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vDP gives every device a share of the minibatch: ", o.num_devices,
        " devices need a minibatch of at least ", o.num_devices, ", got ", o.minibatch));
  }
  const int layers = model.num_layers();
  const double link = model.bandwidths().host_all_devices / o.num_devices;
  const std::vector<double> fractions = {1.0, 0.7, 0.5};
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  SearchResult best;
  bool have = false;
  double fastest = std::numeric_limits<double>::infinity();
  absl::Status first_error = absl::OkStatus();
  auto note = [&](const absl::Status& s) {
    if (first_error.ok() && !s.ok()) first_error = s;
  };
  // The fastest baseline's time: the tolerance window never reaches past it.
  double cap = std::numeric_limits<double>::infinity();
  // The fastest Harmony candidate: refined too where it is not the best.
  std::optional<std::pair<TaskGraph, SimResult>> quickest;
  // The fastest Harmony candidate of each mode and microbatch pair: the
  // choices can reorder them (see the refinement below).
  std::map<std::tuple<int, int, int>, std::pair<TaskGraph, SimResult>> quickest_per_size;
  // Counts a simulated candidate and keeps it when it beats the best.
  auto consider = [&](Candidate& cand) -> absl::Status {
    const Config& c = cand.config;
    absl::StatusOr<TaskGraph>& g = cand.graph;
    if (!g.ok()) {
      note(g.status());
      return absl::OkStatus();
    }
    absl::StatusOr<SimResult>& sim = cand.sim;
    if (!sim.ok()) return sim.status();
    ++best.candidates;
    if (!sim->fits) return absl::OkStatus();
    ++best.feasible;
    // Faster wins; within the tolerance, the least product of time and
    // bytes over the host link, then fewer packs. Compared with the
    // fastest time seen, so the winner stays within the tolerance of the
    // fastest.
    const double t = sim->iteration_s;
    if (t < fastest && c.schedule == Schedule::kHarmony) quickest = {*g, *sim};
    if (c.schedule == Schedule::kHarmony && o.refine_fastest && o.refine_each_microbatch) {
      const std::tuple<int, int, int> key{static_cast<int>(c.mode), c.forward_microbatch,
                                          c.backward_microbatch};
      auto it = quickest_per_size.find(key);
      if (it == quickest_per_size.end() || t < it->second.second.iteration_s) {
        quickest_per_size.insert_or_assign(key, std::make_pair(*g, *sim));
      }
    }
    fastest = std::min(fastest, t);
    const uint64_t bytes = sim->swap.host_link();
    const double limit = std::min(fastest * (1 + o.time_tolerance), cap);
    bool better = !have;
    if (have) {
      const double bt = best.sim.iteration_s;
      const uint64_t best_bytes = best.sim.swap.host_link();
      if (bt > limit) {
        better = t < bt;  // The current best fell out of the window.
      } else if (t <= limit) {
        better = BeatsWithinTolerance(t, bytes, bt, best_bytes) ||
                 (!BeatsWithinTolerance(bt, best_bytes, t, bytes) &&
                  TotalPacks(c) < TotalPacks(best.graph.config));
      }
    }
    if (better) {
      best.graph = *std::move(g);
      best.sim = *std::move(sim);
      have = true;
    }
    return absl::OkStatus();
  };
  // Every baseline schedule is a candidate too, at the microbatch its users
  // would pick (the largest power of two that fits): Harmony plans wherever
  // a baseline does, and never slower than one. They go first, so that the
  // fastest caps the tolerance window of what follows (and so the result:
  // a best is only ever chosen within the window, or faster than one that
  // was).
  // (Pinned waves ask for Harmony's vDP in passes: no baseline runs so.)
  if (o.schedule == Schedule::kHarmony && o.backward_packs.empty() && o.waves <= 1) {
    for (Schedule b : {Schedule::kOndemand, Schedule::kDpSwap, Schedule::kGpipe}) {
      const Mode mode = b == Schedule::kGpipe ? Mode::kVpp : Mode::kVdp;
      if (o.mode && *o.mode != mode) continue;
      if (mode == Mode::kVdp && o.minibatch < o.num_devices) continue;
      const int share = mode == Mode::kVdp ? (o.minibatch + o.num_devices - 1) / o.num_devices
                                           : o.minibatch;
      std::vector<int> sizes;
      if (o.microbatch > 0) {
        sizes.push_back(o.microbatch);
      } else {
        int u = model.min_microbatch();
        while (u * 2 <= std::min(share, model.max_backward_microbatch())) u *= 2;
        for (; u >= model.min_microbatch(); u /= 2) sizes.push_back(u);
      }
      SearchOptions bo = o;
      bo.schedule = b;
      for (int u : sizes) {
        absl::StatusOr<SearchResult> r = PlanBaseline(model, bo, u);
        if (!r.ok()) {
          note(r.status());
          continue;
        }
        const bool fits = r->sim.fits;
        if (fits) cap = std::min(cap, r->sim.iteration_s);
        Candidate cand;
        cand.config = r->graph.config;
        cand.graph = std::move(r->graph);
        cand.sim = std::move(r->sim);
        HARMONY_RETURN_IF_ERROR(consider(cand));
        if (fits) break;
      }
    }
  }
  for (Mode mode : modes) {
    if (o.any_fit && have) break;
    if (mode == Mode::kVdp && o.minibatch < o.num_devices) continue;
    if (mode == Mode::kVpp && o.waves > 1) continue;  // Waves are vDP's.
    const int waves = std::max(1, o.waves);
    const int samples = mode == Mode::kVdp
                            ? (o.minibatch / waves + o.num_devices - 1) / o.num_devices
                            : o.minibatch;
    std::vector<int> backward_sizes =
        o.microbatch > 0 ? std::vector<int>{o.microbatch}
                         : Sizes(model.min_microbatch(),
                                 std::min(model.max_backward_microbatch(), samples));
    // Largest first: they tend to be fastest, and what is found first
    // bounds the rest.
    std::reverse(backward_sizes.begin(), backward_sizes.end());
    // Backward packs at microbatches of their own (microbatch_choice.h)
    // at the largest U_b at which every vLayer's backward fits a device
    // alone: some vLayer cannot go larger, and every other pack would be
    // held down with it. (At smaller U_b the search tries the larger sizes
    // for every pack itself.)
    const int fitting_ub = LargestFittingBackwardMicrobatch(model, backward_sizes, o.device_memory);
    auto own_sizes = [&](int ub) {
      return o.schedule == Schedule::kHarmony && o.microbatch == 0 &&
             !model.needs_equal_microbatches() && ub == fitting_ub;
    };
    for (int ub : backward_sizes) {
      if (o.any_fit && have) break;
      // Branch and bound: every device computes the backward (with its
      // recompute) of every vLayer over its share (vDP), or the devices
      // share it all (vPP), whatever the packs; a microbatch size whose
      // compute alone is slower than the window of what was found cannot
      // win, and is not even packed.
      if (have && o.prune) {
        // (With microbatches of their own, a pack may run at up to the
        // largest forward microbatch: each vLayer at its fastest then.)
        const int full = samples / ub, rest = samples % ub;
        double bound =
            own_sizes(ub)
                ? BackwardSecondsLowerBound(model, samples, ub,
                                            std::min(model.max_forward_microbatch(), samples))
                : full * model.BackwardSeconds(0, layers, ub) +
                      (rest > 0 ? model.BackwardSeconds(0, layers, rest) : 0.0);
        if (mode == Mode::kVpp) bound /= o.num_devices;
        const double limit = std::min(fastest * (1 + o.time_tolerance), cap);
        if (bound > limit * (1 + 1e-9)) {
          ++best.pruned;
          continue;
        }
      }
      std::vector<int> forward_sizes{ub};
      if (o.microbatch == 0 && !model.needs_equal_microbatches()) {
        for (int uf : Sizes(ub * 2, std::min(model.max_forward_microbatch(), samples))) {
          forward_sizes.push_back(uf);
        }
      }
      const int microbatches = (samples + ub - 1) / ub;
      // Backward packings.
      std::vector<Packing> backward;
      if (!o.backward_packs.empty()) {
        backward.push_back(o.backward_packs);
      } else {
        for (double f : fractions) {
          PackRequest r;
          r.begin = 0;
          r.end = layers;
          r.microbatch = ub;
          r.microbatches = microbatches;
          r.phase = PackPhase::kBackward;
          r.budget = static_cast<uint64_t>(o.device_memory * f);
          r.swap_bandwidth = link;
          PackRequest sum = r;
          sum.minimize_sum = true;
          const std::vector<std::pair<decltype(&OptimalPacks), const PackRequest*>> packers = {
              {OptimalPacks, &r}, {OptimalPacks, &sum}, {GreedyPacks, &r},
              {BalancedMemoryPacks, &r}, {BalancedTimePacks, &r}};
          bool too_large = false;
          for (const auto& [packer, request] : packers) {
            absl::StatusOr<Packing> p = packer(model, *request);
            if (!p.ok()) {
              too_large = too_large || absl::IsResourceExhausted(p.status());
              note(p.status());
              continue;
            }
            AddUnique(backward, *p);
          }
          // A vLayer too large for the budget with its gradients summed on
          // the device (an embedding table's backward): packs that fit
          // with them summed on the host.
          if (too_large && mode == Mode::kVpp && o.schedule == Schedule::kHarmony &&
              microbatches > 1) {
            r.host_sums = sum.host_sums = true;
            for (const auto& [packer, request] : packers) {
              absl::StatusOr<Packing> p = packer(model, *request);
              if (p.ok()) AddUnique(backward, *p);
            }
          }
        }
        // Packs of one vLayer: what fits wherever anything does.
        Packing singles;
        for (int l = 0; l < layers; ++l) singles.push_back({l, l + 1});
        AddUnique(backward, singles);
        // Pipeline-friendly: a multiple of the device count, even in time.
        if (mode == Mode::kVpp) {
          PackRequest r;
          r.begin = 0;
          r.end = layers;
          r.microbatch = ub;
          r.phase = PackPhase::kBackward;
          r.budget = o.device_memory;
          for (int k : {1, 2, 4}) {
            absl::StatusOr<Packing> p = EvenTimePacks(model, r, k * o.num_devices + 1);
            if (p.ok()) AddUnique(backward, *p);
          }
        }
      }
      for (int uf : forward_sizes) {
        std::vector<Config> configs;
        if (o.progress) {
          o.progress(absl::StrCat("searching ", ModeName(mode), ", microbatches ", uf, "/",
                                  ub, " (", best.candidates, " simulated)"));
        }
        for (const Packing& bwd : backward) {
          const int fused = bwd.back().begin;
          std::vector<Packing> forward;
          if (fused > 0) {
            // The backward packs before the fused one, if they fit forward...
            Packing reuse(bwd.begin(), bwd.end() - 1);
            bool fits = true;
            for (const PackRange& p : reuse) {
              fits = fits && model.ForwardMemory(p.begin, p.end, uf) <= o.device_memory;
            }
            if (fits) forward.push_back(reuse);
            // ... and packings of their own (fewer budgets: forward packs
            // hold no gradients or saved activations).
            for (double f : {1.0, 0.6}) {
              PackRequest r;
              r.begin = 0;
              r.end = fused;
              r.microbatch = uf;
              r.microbatches = (samples + uf - 1) / uf;
              r.phase = PackPhase::kForward;
              r.budget = static_cast<uint64_t>(o.device_memory * f);
              r.swap_bandwidth = link;
              PackRequest sum = r;
              sum.minimize_sum = true;
              const std::vector<std::pair<decltype(&OptimalPacks), const PackRequest*>>
                  packers = {{OptimalPacks, &r}, {OptimalPacks, &sum}, {GreedyPacks, &r}};
              for (const auto& [packer, request] : packers) {
                absl::StatusOr<Packing> p = packer(model, *request);
                if (!p.ok()) {
                  note(p.status());
                  continue;
                }
                AddUnique(forward, *p);
              }
            }
          } else {
            forward.push_back({});
          }
          for (const Packing& fwd : forward) {
            Config c;
            c.mode = mode;
            c.schedule = o.schedule;
            c.num_devices = o.num_devices;
            c.device_memory = o.device_memory;
            c.minibatch = o.minibatch;
            c.forward_microbatch = uf;
            c.backward_microbatch = ub;
            c.forward_packs = fwd;
            c.backward_packs = bwd;
            c.waves = mode == Mode::kVdp ? waves : 1;
            c.peer_weights = mode == Mode::kVdp && o.num_devices > 1 &&
                             o.schedule == Schedule::kHarmony &&
                             (o.peer_weights ? *o.peer_weights
                                             : model.bandwidths().peer >=
                                                   model.bandwidths().host_to_device);
            // vDP with and without the activations between a device's
            // packs kept on it: fewer bytes over the link for more device
            // memory.
            for (bool local : {true, false}) {
              if (mode != Mode::kVdp ? local
                                     : o.local_activations && *o.local_activations != local) {
                continue;
              }
              c.local_activations = local;
              for (Config& k : KeepVariants(model, c, o.keep)) configs.push_back(std::move(k));
              // Each backward pack at the largest microbatch it fits,
              // beside the next pack's prefetched weights and, where that
              // differs, without them (the retries below then swap those
              // in late).
              if (own_sizes(ub)) {
                std::optional<Config> near = LargerPackMicrobatches(model, c, true);
                std::optional<Config> alone = LargerPackMicrobatches(model, c, false);
                if (near && alone &&
                    near->backward_pack_microbatch == alone->backward_pack_microbatch) {
                  alone.reset();
                }
                for (const std::optional<Config>* v : {&near, &alone}) {
                  if (!*v) continue;
                  for (Config& k : KeepVariants(model, **v, o.keep)) {
                    configs.push_back(std::move(k));
                  }
                }
              }
            }
          }
        }
        // Simulated in parallel, compared in order: the same answer for any
        // number of threads. Those that do not fit double-buffered are
        // tried again single-buffered (no prefetch: one pack's weights at a
        // time).
        // A config whose compute alone is slower than the window of what
        // was found cannot win: not simulated (nor is its single-buffered
        // form).
        if (have && o.prune) {
          const double limit = std::min(fastest * (1 + o.time_tolerance), cap);
          const size_t before = configs.size();
          configs.erase(std::remove_if(configs.begin(), configs.end(),
                                       [&](const Config& c) {
                                         return BusiestDeviceComputeSeconds(model, c) >
                                                limit * (1 + 1e-9);
                                       }),
                        configs.end());
          best.pruned_configs += static_cast<int>(before - configs.size());
        }
        std::vector<Candidate> done = SimulateAll(model, std::move(configs), threads);
        // Those that do not fit are tried again (fit_retries.h), and last
        // those single-buffered with fewer host inputs ahead.
        FitRetries retries;
        auto retry = [&](const Candidate& cand) {
          retries.Add(model, o.minibatch, o.num_devices, o.waves, cand);
        };
        for (Candidate& cand : done) {
          retry(cand);
          HARMONY_RETURN_IF_ERROR(consider(cand));
        }
        for (Candidate& cand : SimulateAll(model, std::move(retries.bounded), threads)) {
          retry(cand);
          HARMONY_RETURN_IF_ERROR(consider(cand));
        }
        for (Candidate& cand : SimulateAll(model, std::move(retries.waved), threads)) {
          retry(cand);
          HARMONY_RETURN_IF_ERROR(consider(cand));
        }
        for (Candidate& cand : SimulateAll(model, std::move(retries.summed), threads)) {
          retry(cand);
          HARMONY_RETURN_IF_ERROR(consider(cand));
        }
        for (Candidate& cand : SimulateAll(model, std::move(retries.single), threads)) {
          retries.AddFewerAhead(cand);
          HARMONY_RETURN_IF_ERROR(consider(cand));
        }
        for (Candidate& cand : SimulateAll(model, std::move(retries.fewer_ahead), threads)) {
          HARMONY_RETURN_IF_ERROR(consider(cand));
        }
      }
    }
  }
  // Choices made on the best candidate, each result competing as any
  // candidate does (faster, or within the tolerance at a smaller product of
  // time and bytes over the link).
  auto refine = [&](const char* what, const auto& choose) -> absl::Status {
    if (o.progress) o.progress(absl::StrCat(what, " (", best.candidates, " simulated)"));
    int simulated = 0;
    std::optional<Candidate> chosen =
        choose(model, best.graph.config, best.sim.iteration_s, threads, &simulated);
    best.candidates += simulated;
    if (!chosen) return absl::OkStatus();
    --best.candidates;  // consider() counts it again.
    return consider(*chosen);
  };
  // The choices, one after another, on the best candidate.
  auto refine_all = [&]() -> absl::Status {
    // Adjacent packs merged where the simulator says so (merge_choice.h),
    // unless the packs were pinned.
    if (have && !o.any_fit && o.backward_packs.empty()) {
      HARMONY_RETURN_IF_ERROR(refine("merging packs", [](auto&&... a) {
        return ChooseMergedPacks(a...);
      }));
    }
    // Prefetch or swap in late, per pack, where the best candidate swaps some
    // weights in late.
    if (have && !o.any_fit && AnyLate(best.graph.config)) {
      HARMONY_RETURN_IF_ERROR(refine("choosing prefetch or late weights per pack",
                                     [](auto&&... a) { return ChoosePrefetchedPacks(a...); }));
    }
    // Keep or recompute, per pack.
    if (have && !o.any_fit && o.keep == KeepActivations::kAuto) {
      HARMONY_RETURN_IF_ERROR(refine("choosing keep or recompute per pack",
                                     [](auto&&... a) { return ChooseKeptPacks(a...); }));
    }
    return absl::OkStatus();
  };
  // Time times bytes over the link: what BeatsWithinTolerance compares.
  const auto product = [](const SimResult& r) {
    return r.iteration_s * static_cast<double>(std::max<uint64_t>(r.swap.host_link(), 1));
  };
  const double pre_seconds = best.sim.iteration_s;
  const double pre_product = product(best.sim);
  const double pre_fastest = fastest;
  HARMONY_RETURN_IF_ERROR(refine_all());
  // Refines `seed` as the best, then lets the best before it compete.
  auto refine_seed = [&](std::pair<TaskGraph, SimResult> seed) -> absl::Status {
    SearchResult first = best;
    best.graph = std::move(seed.first);
    best.sim = std::move(seed.second);
    HARMONY_RETURN_IF_ERROR(refine_all());
    Candidate other;
    other.config = first.graph.config;
    other.graph = std::move(first.graph);
    other.sim = std::move(first.sim);
    --best.candidates;  // consider() counts it again.
    --best.feasible;
    return consider(other);
  };
  auto refined_already = [&](const SimResult& r) {
    return r.iteration_s == pre_seconds && product(r) == pre_product;
  };
  // Within the tolerance the best may be slower than the fastest candidate
  // for fewer bytes, and the choices can take the fastest further: they
  // run on it too, and the better of the two results wins. (On the bench's
  // vgg the best before the choices had been 530.3 ms for 117.9 MB, the
  // fastest 510.3 ms: refined, 511.8 and 486.6 ms; AMD EPYC.)
  // Only where the fastest is near the best at par (within 10% of its time
  // times bytes): a fastest moving many times the bytes (on 200 synthesized
  // vLayers, 13x) seldom refines into a winner, and its choices cost most
  // (+23 s of 37 there).
  if (have && !o.any_fit && o.refine_fastest && quickest && !refined_already(quickest->second) &&
      product(quickest->second) <= 1.1 * pre_product) {
    HARMONY_RETURN_IF_ERROR(refine_seed(*std::move(quickest)));
  }
  // So do the fastest candidates of the other microbatch pairs within 10%
  // of the fastest (merges change most where packs are small: the order
  // before the choices is a weak guide), fastest first, while they have
  // simulated at most a quarter of what the search had (DESIGN.md §5).
  if (have && !o.any_fit && o.refine_fastest) {
    std::vector<std::pair<TaskGraph, SimResult>> seeds;
    for (auto& [key, seed] : quickest_per_size) {
      // (The fastest's own pair: refined above, or left out for its bytes.)
      if (seed.second.iteration_s > 1.1 * pre_fastest || refined_already(seed.second) ||
          (quickest && seed.second.iteration_s == pre_fastest)) {
        continue;
      }
      seeds.push_back(std::move(seed));
    }
    std::stable_sort(seeds.begin(), seeds.end(), [](const auto& a, const auto& b) {
      return a.second.iteration_s < b.second.iteration_s;
    });
    const int searched = best.candidates;
    for (auto& seed : seeds) {
      if (best.candidates - searched > searched / 4) break;
      HARMONY_RETURN_IF_ERROR(refine_seed(std::move(seed)));
    }
  }
  if (!have) {
    if (!first_error.ok() && !absl::IsInvalidArgument(first_error)) return first_error;
    return absl::ResourceExhaustedError(absl::StrCat(
        "no configuration fits ", o.num_devices, " device(s) of ",
        common::FormatBytes(o.device_memory), " (", best.candidates,
        " simulated); give more device memory or a finer decomposition",
        first_error.ok() ? "" : absl::StrCat(" (", first_error.message(), ")")));
  }
  if (best.graph.tasks.empty()) {
    // SimulateAll kept the winner's config only.
    HARMONY_ASSIGN_OR_RETURN(best.graph, BuildTaskGraph(model, best.graph.config));
  }
  return best;
}

bool BeatsWithinTolerance(double seconds, uint64_t bytes, double best_seconds,
                          uint64_t best_bytes) {
  // (No bytes at all: time decides.)
  return seconds * static_cast<double>(std::max<uint64_t>(bytes, 1)) <
         best_seconds * static_cast<double>(std::max<uint64_t>(best_bytes, 1));
}

}  // namespace harmony::planner
