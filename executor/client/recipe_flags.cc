#include "executor/client/recipe_flags.h"

namespace harmony::executor {

namespace po = boost::program_options;

void AddRecipeFlags(po::options_description& flags, RecipeFlags* v) {
  // clang-format off
  flags.add_options()
      ("lr-schedule", po::value(&v->lr_schedule),
       "constant | cosine | linear | wsd: the rate of iteration i is lr x f(i); warm-up "
       "(i < W): f = (i + 1) / W; cosine: r = (i - W) / (D - W) capped at 1, "
       "f = m + (1 - m) (1 + cos(pi r)) / 2 with m = min-lr / lr; linear: f = m + (1 - m) "
       "(1 - r); wsd: f = 1, then over the last D iterations f falls linearly to m "
       "(default constant)")
      ("warmup-iterations", po::value(&v->warmup_iterations),
       "W: iterations of linear warm-up from lr / W to lr (default 0)")
      ("decay-iterations", po::value(&v->decay_iterations),
       "D: cosine, linear: the iteration the decay ends at (default --iterations); wsd: the "
       "length of the final decay (default 20% of --iterations)")
      ("min-lr", po::value(&v->min_lr), "the rate the decay ends at (default 0)")
      ("clip-grad-norm", po::value(&v->clip_grad_norm),
       "clip the gradients' global 2-norm to this before each step, exactly as "
       "torch.nn.utils.clip_grad_norm_ (default 0: off); the norm is reported per iteration")
      ("clip-mode", po::value(&v->clip_mode),
       "auto | speculate | hold: updates that come before the norm is known step at once "
       "and are redone from a saved copy when clipping fires, or wait for the whole "
       "backward (default auto: speculate, and hold after an iteration that clipped when "
       "the plan says a redo costs more than holding; harmony-plan prints all three)")
      ("no-decay", po::value(&v->no_decay)->implicit_value("auto"),
       "parameters without weight decay: auto (biases, norm weights: every 1-D parameter), "
       "shell patterns over names ('ln_*,*.bias'), or both ('auto,wpe.*')")
      ("no-decay-embeddings",
       "with --no-decay: nn.Embedding and nn.EmbeddingBag weights take no decay either")
      ("eval-data", po::value(&v->eval_data),
       "validation data, in the form of --data: its mean loss, forward-only in eval mode "
       "(dropout off, BatchNorm's running statistics) through the plan's packs, at the end "
       "and as --eval-every says")
      ("eval-every", po::value(&v->eval_every),
       "K: evaluate after every K iterations too (default 0: only at the end)")
      ("eval-iterations", po::value(&v->eval_iterations),
       "M: minibatches of the validation data per evaluation, the same first M each time "
       "(default 0: every whole minibatch it holds; of a token file, at most 50)");
  // clang-format on
}

void ReadRecipeSwitches(const po::variables_map& vm, RecipeFlags* v) {
  if (vm.count("no-decay-embeddings")) v->no_decay_embeddings = true;
}

void ReadRecipeConfig(common::JsonConfig& config, RecipeFlags* v) {
  config.Get("lr_schedule", &v->lr_schedule);
  config.Get("warmup_iterations", &v->warmup_iterations);
  config.Get("decay_iterations", &v->decay_iterations);
  config.Get("min_lr", &v->min_lr);
  config.Get("clip_grad_norm", &v->clip_grad_norm);
  config.Get("clip_mode", &v->clip_mode);
  config.Get("no_decay", &v->no_decay);
  config.Get("no_decay_embeddings", &v->no_decay_embeddings);
  config.Get("eval_data", &v->eval_data);
  config.Get("eval_every", &v->eval_every);
  config.Get("eval_iterations", &v->eval_iterations);
}

void ToProto(const RecipeFlags& v, proto::OptimizerSettings* out) {
  out->set_lr_schedule(v.lr_schedule);
  out->set_warmup_iterations(v.warmup_iterations);
  out->set_decay_iterations(v.decay_iterations);
  out->set_min_lr(v.min_lr);
  out->set_clip_grad_norm(v.clip_grad_norm);
  out->set_clip_mode(v.clip_mode);
  out->set_no_decay(v.no_decay);
  out->set_no_decay_embeddings(v.no_decay_embeddings);
  out->set_eval_data_path(v.eval_data);
  out->set_eval_every(v.eval_every);
  out->set_eval_iterations(v.eval_iterations);
}

absl::Status ToRecipe(const RecipeFlags& v, TrainingRecipe* r) {
  absl::StatusOr<optim::ScheduleKind> schedule = optim::ParseScheduleKind(v.lr_schedule);
  if (!schedule.ok()) return schedule.status();
  r->lr_schedule.kind = *schedule;
  r->lr_schedule.warmup_iterations = v.warmup_iterations;
  r->lr_schedule.decay_iterations = v.decay_iterations;
  r->lr_schedule.min_lr = v.min_lr;
  r->clip_grad_norm = v.clip_grad_norm;
  absl::StatusOr<ClipMode> mode = ParseClipMode(v.clip_mode);
  if (!mode.ok()) return mode.status();
  r->clip_mode = *mode;
  r->no_decay = v.no_decay;
  r->no_decay_embeddings = v.no_decay_embeddings;
  r->eval_data = v.eval_data;
  r->eval_every = v.eval_every;
  r->eval_iterations = v.eval_iterations;
  return absl::OkStatus();
}

}  // namespace harmony::executor
