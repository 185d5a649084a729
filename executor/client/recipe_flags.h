// The training recipe's flags (schedules, clipping, weight-decay groups),
// shared by `harmony-exec run` and `harmony-ctl submit` so both take the
// same flags with the same help (docs/DESIGN.md §6.8).
//
// Thread-safety: plain values and functions.

#ifndef HARMONY_EXECUTOR_CLIENT_RECIPE_FLAGS_H_
#define HARMONY_EXECUTOR_CLIENT_RECIPE_FLAGS_H_

#include <cstdint>
#include <string>

#include <boost/program_options.hpp>

#include "absl/status/status.h"
#include "common/json_config.h"
#include "executor/runtime/recipe.h"
#include "proto/executor.pb.h"

namespace harmony::executor {

struct RecipeFlags {
  std::string lr_schedule = "constant";
  int64_t warmup_iterations = 0;
  int64_t decay_iterations = 0;
  double min_lr = 0;
  double clip_grad_norm = 0;
  std::string clip_mode = "auto";
  std::string no_decay;  // "auto" when --no-decay is given alone.
  bool no_decay_embeddings = false;
  std::string eval_data;
  int64_t eval_every = 0;
  int64_t eval_iterations = 0;
};

// Adds --lr-schedule, --warmup-iterations, --decay-iterations, --min-lr,
// --clip-grad-norm, --clip-mode, --no-decay, --no-decay-embeddings,
// --eval-data, --eval-every, --eval-iterations.
void AddRecipeFlags(boost::program_options::options_description& flags, RecipeFlags* values);
// After parsing: the switches.
void ReadRecipeSwitches(const boost::program_options::variables_map& vm, RecipeFlags* values);
// From a --config file (keys: the flag names with '_').
void ReadRecipeConfig(common::JsonConfig& config, RecipeFlags* values);
// Into the submission's optimizer settings (the evaluation data's path as
// given: make it absolute first).
void ToProto(const RecipeFlags& values, proto::OptimizerSettings* out);
// Into a run's recipe: InvalidArgument naming --lr-schedule or --clip-mode
// for an unknown name.
absl::Status ToRecipe(const RecipeFlags& values, TrainingRecipe* out);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_CLIENT_RECIPE_FLAGS_H_
