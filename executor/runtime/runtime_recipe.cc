// Runtime::Impl's recipe (runtime_impl.h): the learning-rate schedule, the
// weight-decay groups and gradient clipping, set up once the host store
// exists, and recorded in checkpoints.

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "executor/runtime/runtime_impl.h"
#include "nlohmann/json.hpp"

namespace harmony::executor {
namespace {

bool IsEmbeddingType(const std::string& qualified) {
  const std::string tail = qualified.substr(qualified.rfind('.') + 1);
  return tail == "Embedding" || tail == "EmbeddingBag";
}

}  // namespace

absl::Status Runtime::Impl::SetUpRecipe() {
  TrainingRecipe& r = options.recipe;
  HARMONY_RETURN_IF_ERROR(ResolveRecipe(options.optimizer, r.lr_schedule.total_iterations, r));
  HARMONY_ASSIGN_OR_RETURN(const NoDecayRule rule, ParseNoDecay(r.no_decay, r.no_decay_embeddings));
  const double clip = r.clip_grad_norm;
  if (clip > 0 && options.world.distributed() && options.world.shard_optimizer_state) {
    return absl::InvalidArgumentError(
        "--clip-grad-norm with --shard-optimizer-state is not supported: each vLayer's summed "
        "gradients are only on its owner; drop one of them");
  }
  // The model's parameters in parameters() order (a tied one once), by
  // canonical name, and which belong to embedding modules.
  std::vector<std::string> order;
  std::set<std::string> in_embedding;
  HARMONY_RETURN_IF_ERROR(common::CallTorch("reading the model's parameters", [&] {
    std::set<const void*> seen;
    for (const auto& p : model.named_parameters(/*recurse=*/true)) {
      if (!seen.insert(p.value.unsafeGetTensorImpl()).second) continue;
      auto canonical = aliases.find(p.name);
      order.push_back(canonical != aliases.end() ? canonical->second : p.name);
    }
    for (const auto& m : model.named_modules()) {
      if (!m.value.type()->name() || !IsEmbeddingType(m.value.type()->name()->qualifiedName())) {
        continue;
      }
      for (const auto& p : m.value.named_parameters(/*recurse=*/false)) {
        const std::string name = m.name.empty() ? p.name : absl::StrCat(m.name, ".", p.name);
        auto canonical = aliases.find(name);
        in_embedding.insert(canonical != aliases.end() ? canonical->second : name);
      }
    }
  }, absl::StatusCode::kInternal));
  if (rule.any()) {
    host->SetNoDecay([&](const std::string& name, const at::Tensor& t) {
      return rule.Matches(name, t.dim(), in_embedding.count(name) > 0);
    });
  }
  // Speculating keeps the updates overlapped with the backward; holding
  // costs the whole optimizer time after it. Auto speculates, and holds
  // after an iteration that clipped when the plan's simulation says a redo
  // costs more than holding (plans made before it: speculates).
  const proto::Estimates& e = plan.estimates();
  const bool redo_costs_more = e.clip_hold_s() > 0 && e.clip_speculate_fires_s() > e.clip_hold_s();
  UpdateRecipe recipe;
  recipe.hold_after_clipping = redo_costs_more;
  recipe.learning_rate = options.optimizer.learning_rate;
  recipe.schedule = r.lr_schedule;
  recipe.clip_grad_norm = clip;
  recipe.clip_mode = r.clip_mode;
  recipe.norm_threads = threads_per_device;
  HARMONY_ASSIGN_OR_RETURN(updates, HostUpdates::Create(graph, *host, order, recipe));
  return absl::OkStatus();
}

std::string Runtime::Impl::RecipeJson() const {
  const optim::LrSchedule& s = options.recipe.lr_schedule;
  nlohmann::json j = {
      {"lr", options.optimizer.learning_rate},
      {"lr_schedule",
       {{"kind", optim::ScheduleKindName(s.kind)},
        {"warmup_iterations", s.warmup_iterations},
        {"decay_iterations", s.decay_iterations},
        {"min_lr", s.min_lr},
        {"total_iterations", s.total_iterations}}},
      {"clip_grad_norm", options.recipe.clip_grad_norm},
      {"weight_decay", options.optimizer.weight_decay},
      {"no_decay", host->no_decay_names()},
  };
  return j.dump();
}

absl::Status Runtime::Impl::CheckRecipe(const std::string& text) const {
  // An older checkpoint: a constant rate, decay everywhere.
  nlohmann::json j = nlohmann::json::object();
  if (!text.empty()) {
    j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError("the checkpoint's recipe is not JSON");
    }
  }
  const std::string mine = optim::DescribeSchedule(options.recipe.lr_schedule,
                                                   options.optimizer.learning_rate);
  std::string theirs = "constant lr (not recorded)";
  bool same_schedule = options.recipe.lr_schedule.kind == optim::ScheduleKind::kConstant &&
                       options.recipe.lr_schedule.warmup_iterations == 0;
  if (j.contains("lr_schedule") && j["lr_schedule"].is_object()) {
    const nlohmann::json& s = j["lr_schedule"];
    optim::LrSchedule r;
    absl::StatusOr<optim::ScheduleKind> kind =
        optim::ParseScheduleKind(s.value("kind", std::string("constant")));
    if (!kind.ok()) return kind.status();
    r.kind = *kind;
    r.warmup_iterations = s.value("warmup_iterations", int64_t{0});
    r.decay_iterations = s.value("decay_iterations", int64_t{0});
    r.min_lr = s.value("min_lr", 0.0);
    r.total_iterations = s.value("total_iterations", int64_t{0});
    const double lr = j.value("lr", 0.0);
    theirs = optim::DescribeSchedule(r, lr);
    // The total matters to wsd (its decay ends there) only.
    optim::LrSchedule a = options.recipe.lr_schedule;
    if (a.kind != optim::ScheduleKind::kWsd) a.total_iterations = r.total_iterations = 0;
    same_schedule = a == r && lr == options.optimizer.learning_rate;
  }
  if (!same_schedule) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint was trained with learning rate ", theirs, "; this run's is ", mine,
        " (give the same --lr and schedule flags to continue it)"));
  }
  std::vector<std::string> names;
  if (j.contains("no_decay") && j["no_decay"].is_array()) {
    for (const auto& n : j["no_decay"]) {
      if (n.is_string()) names.push_back(n.get<std::string>());
    }
  }
  const std::vector<std::string>& no_decay_names = host->no_decay_names();
  if (names != no_decay_names) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint's parameters without weight decay are ",
        names.empty() ? "none" : absl::StrJoin(names, ", "), "; this run's are ",
        no_decay_names.empty() ? "none" : absl::StrJoin(no_decay_names, ", "),
        " (give the same --no-decay)"));
  }
  return absl::OkStatus();
}

}  // namespace harmony::executor
