#include "executor/runtime/recipe.h"

#include <fnmatch.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace harmony::executor {

absl::StatusOr<ClipMode> ParseClipMode(absl::string_view text) {
  if (text == "auto") return ClipMode::kAuto;
  if (text == "speculate") return ClipMode::kSpeculate;
  if (text == "hold") return ClipMode::kHold;
  return absl::InvalidArgumentError(absl::StrCat(
      "--clip-mode: unknown mode \"", text, "\" (expected auto, speculate or hold)"));
}

const char* ClipModeName(ClipMode mode) {
  switch (mode) {
    case ClipMode::kSpeculate: return "speculate";
    case ClipMode::kHold: return "hold";
    default: return "auto";
  }
}

bool NoDecayRule::Matches(const std::string& name, int64_t dims, bool in_embedding) const {
  if (one_dimensional && dims <= 1) return true;
  if (embeddings && in_embedding) return true;
  for (const std::string& p : patterns) {
    for (size_t at = 0; at != std::string::npos;) {
      if (fnmatch(p.c_str(), name.c_str() + at, 0) == 0) return true;
      at = name.find('.', at);
      if (at != std::string::npos) ++at;
    }
  }
  return false;
}

std::string NoDecayRule::ToString() const {
  std::vector<std::string> parts;
  if (one_dimensional) parts.push_back("1-D (biases, norms)");
  if (embeddings) parts.push_back("embeddings");
  for (const std::string& p : patterns) parts.push_back(p);
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

absl::StatusOr<NoDecayRule> ParseNoDecay(absl::string_view text, bool embeddings) {
  NoDecayRule rule;
  rule.embeddings = embeddings;
  if (text.empty()) return rule;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--no-decay \"", text, "\": an empty pattern (expected auto or patterns separated "
          "by commas, e.g. 'auto,wte.*')"));
    }
    if (part == "auto") {
      rule.one_dimensional = true;
    } else {
      rule.patterns.emplace_back(part);
    }
  }
  return rule;
}

absl::Status ResolveRecipe(const optim::OptimizerOptions& o, int64_t iterations,
                           TrainingRecipe& r) {
  struct Value {
    const char* flag;
    double value;
    bool below_one;  // Betas: in [0, 1).
  };
  for (const Value& v : {Value{"--lr", o.learning_rate, false},
                         Value{"--momentum", o.momentum, false},
                         Value{"--weight-decay", o.weight_decay, false},
                         Value{"--beta1", o.beta1, true}, Value{"--beta2", o.beta2, true},
                         Value{"--eps", o.epsilon, false},
                         Value{"--clip-grad-norm", r.clip_grad_norm, false}}) {
    if (!std::isfinite(v.value) || v.value < 0 || (v.below_one && v.value >= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          v.flag, " must be a finite number ", v.below_one ? "in [0, 1)" : ">= 0", ", got ",
          v.value));
    }
  }
  if (r.eval_every < 0 || r.eval_iterations < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.eval_every < 0 ? "--eval-every" : "--eval-iterations", " must be >= 0, got ",
        r.eval_every < 0 ? r.eval_every : r.eval_iterations));
  }
  if (r.eval_data.empty() && (r.eval_every > 0 || r.eval_iterations > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.eval_every > 0 ? "--eval-every" : "--eval-iterations",
        " needs --eval-data (the validation set to evaluate)"));
  }
  r.lr_schedule.total_iterations = iterations;
  absl::StatusOr<optim::LrSchedule> s = optim::ResolveSchedule(r.lr_schedule, o.learning_rate);
  if (!s.ok()) return s.status();
  r.lr_schedule = *s;
  return ParseNoDecay(r.no_decay, r.no_decay_embeddings).status();
}

std::string DescribeRecipe(const optim::OptimizerOptions& o, const TrainingRecipe& r) {
  std::string out = optim::DescribeSchedule(r.lr_schedule, o.learning_rate);
  if (r.clip_grad_norm > 0) {
    absl::StrAppend(&out, "; clip grad norm ", r.clip_grad_norm, " (", ClipModeName(r.clip_mode),
                    ")");
  }
  absl::StatusOr<NoDecayRule> rule = ParseNoDecay(r.no_decay, r.no_decay_embeddings);
  if (rule.ok() && rule->any() && o.weight_decay > 0) {
    absl::StrAppend(&out, "; no weight decay: ", rule->ToString());
  }
  return out;
}

std::string DescribeEvaluation(const TrainingRecipe& r) {
  if (r.eval_data.empty()) return "";
  return absl::StrCat(r.eval_data, ", ",
                      r.eval_iterations > 0 ? absl::StrCat(r.eval_iterations, " minibatches")
                                            : "every whole minibatch",
                      " each time, ",
                      r.eval_every > 0 ? absl::StrCat("after every ", r.eval_every,
                                                      " iterations and ")
                                       : "",
                      "at the end");
}

}  // namespace harmony::executor
