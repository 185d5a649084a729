#include "executor/jobs/job_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/plan_file.h"
#include "executor/runtime/recipe.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace harmony::executor {
namespace {

using nlohmann::json;

absl::string_view OptimizerName(optim::OptimizerKind kind) {
  switch (kind) {
    case optim::OptimizerKind::kSgd:
      return "sgd";
    case optim::OptimizerKind::kAdam:
      return "adam";
    case optim::OptimizerKind::kAdamW:
      return "adamw";
  }
  return "sgd";
}

// Times as Unix nanoseconds: exact round trips.
int64_t ToNanos(absl::Time t) { return absl::ToUnixNanos(t); }
absl::Time FromNanos(int64_t n) { return absl::FromUnixNanos(n); }

json ProgressToJson(const JobProgress& p) {
  return json{{"iteration", p.iteration},
              {"iterations", p.iterations},
              {"loss", p.loss},
              {"samples_per_s", p.samples_per_s},
              {"swap_in_bytes", p.swap_in_bytes},
              {"swap_out_bytes", p.swap_out_bytes},
              {"eta_s", p.eta_s},
              {"iteration_s", p.iteration_s},
              {"time_ns", ToNanos(p.time)},
              {"device_peak_bytes", p.device_peak_bytes},
              {"emulated_link", p.emulated_link},
              {"eval_loss", p.eval_loss},
              {"eval_iteration", p.eval_iteration}};
}

JobProgress ProgressFromJson(const json& j) {
  JobProgress p;
  p.iteration = j.at("iteration").get<int64_t>();
  p.iterations = j.at("iterations").get<int64_t>();
  p.loss = j.at("loss").get<double>();
  p.samples_per_s = j.at("samples_per_s").get<double>();
  p.swap_in_bytes = j.at("swap_in_bytes").get<uint64_t>();
  p.swap_out_bytes = j.at("swap_out_bytes").get<uint64_t>();
  p.eta_s = j.at("eta_s").get<double>();
  p.iteration_s = j.value("iteration_s", 0.0);
  p.time = FromNanos(j.at("time_ns").get<int64_t>());
  p.device_peak_bytes = j.at("device_peak_bytes").get<std::vector<uint64_t>>();
  p.emulated_link = j.value("emulated_link", false);
  p.eval_loss = j.value("eval_loss", 0.0);
  p.eval_iteration = j.value("eval_iteration", int64_t{0});
  return p;
}

}  // namespace

std::string JobRecordToJson(const JobRecord& r) {
  json history = json::array();
  for (const StateChange& c : r.history) {
    history.push_back(json{{"state", std::string(JobStateName(c.state))},
                           {"time_ns", ToNanos(c.time)},
                           {"reason", c.reason}});
  }
  json j{{"id", r.id},
         {"name", r.name},
         {"submission_id", r.submission_id},
         {"state", std::string(JobStateName(r.state))},
         {"reason", r.reason},
         {"history", history},
         {"submitted_at_ns", ToNanos(r.submitted_at)},
         {"model_sha256", r.model_sha256},
         {"model_path", r.model_path},
         {"data_path", r.data_path},
         {"token_dtype", r.token_dtype},
         {"tensorboard_dir", r.tensorboard_dir},
         {"bf16", r.bf16},
         {"overwrite", r.overwrite},
         {"seq_len", r.seq_len},
         {"output_path", r.output_path},
         {"iterations", r.iterations},
         {"optimizer",
          {{"kind", std::string(OptimizerName(r.optimizer.kind))},
           {"learning_rate", r.optimizer.learning_rate},
           {"momentum", r.optimizer.momentum},
           {"weight_decay", r.optimizer.weight_decay},
           {"beta1", r.optimizer.beta1},
           {"beta2", r.optimizer.beta2},
           {"epsilon", r.optimizer.epsilon}}},
         {"recipe",
          {{"lr_schedule", optim::ScheduleKindName(r.recipe.lr_schedule.kind)},
           {"warmup_iterations", r.recipe.lr_schedule.warmup_iterations},
           {"decay_iterations", r.recipe.lr_schedule.decay_iterations},
           {"min_lr", r.recipe.lr_schedule.min_lr},
           {"total_iterations", r.recipe.lr_schedule.total_iterations},
           {"clip_grad_norm", r.recipe.clip_grad_norm},
           {"clip_mode", ClipModeName(r.recipe.clip_mode)},
           {"no_decay", r.recipe.no_decay},
           {"no_decay_embeddings", r.recipe.no_decay_embeddings},
           {"eval_data", r.recipe.eval_data},
           {"eval_every", r.recipe.eval_every},
           {"eval_iterations", r.recipe.eval_iterations}}},
         {"checkpoint_interval", r.checkpoint_interval},
         {"checkpoint_minutes", r.checkpoint_minutes},
         {"keep_checkpoints", r.keep_checkpoints},
         {"seed", r.seed},
         {"flush_denormal", r.flush_denormal ? json(*r.flush_denormal) : json(nullptr)},
         {"num_devices", r.num_devices},
         {"device_memory_bytes", r.device_memory_bytes},
         {"host_memory_bytes", r.host_memory_bytes},
         {"mode", r.mode},
         {"devices", r.devices},
         {"checkpoint_path", r.checkpoint_path},
         {"checkpoint_iteration", r.checkpoint_iteration},
         {"resume_from", r.resume_from},
         {"resumed_from_iteration", r.resumed_from_iteration},
         {"kept_model_path", r.kept_model_path}};
  if (r.progress) j["progress"] = ProgressToJson(*r.progress);
  if (r.world.active()) {
    j["world"] = {{"daemons", r.world.daemons},
                  {"rank", r.world.rank},
                  {"world_id", r.world.world_id},
                  {"store", r.world.store},
                  {"job_ids", r.world.job_ids},
                  {"shard_optimizer_state", r.world.shard_optimizer_state},
                  {"timeout_s", r.world.timeout_s}};
    j["held"] = r.held;
  }
  return j.dump(2);
}

absl::StatusOr<JobRecord> JobRecordFromJson(absl::string_view text) {
  // nlohmann::json throws on malformed text and on missing or mistyped
  // keys; both become InvalidArgument here.
  try {
    json j = json::parse(text);
    JobRecord r;
    r.id = j.at("id").get<std::string>();
    r.name = j.at("name").get<std::string>();
    r.submission_id = j.at("submission_id").get<std::string>();
    auto state = ParseJobState(j.at("state").get<std::string>());
    if (!state) return absl::InvalidArgumentError("unknown job state");
    r.state = *state;
    r.reason = j.at("reason").get<std::string>();
    for (const json& c : j.at("history")) {
      auto s = ParseJobState(c.at("state").get<std::string>());
      if (!s) return absl::InvalidArgumentError("unknown job state in history");
      r.history.push_back(
          {*s, FromNanos(c.at("time_ns").get<int64_t>()), c.at("reason").get<std::string>()});
    }
    r.submitted_at = FromNanos(j.at("submitted_at_ns").get<int64_t>());
    r.model_sha256 = j.at("model_sha256").get<std::string>();
    r.model_path = j.at("model_path").get<std::string>();
    r.data_path = j.at("data_path").get<std::string>();
    r.token_dtype = j.value("token_dtype", std::string());
    r.tensorboard_dir = j.value("tensorboard_dir", std::string());
    r.bf16 = j.value("bf16", false);
    r.overwrite = j.value("overwrite", false);
    r.seq_len = j.value("seq_len", int64_t{0});
    r.output_path = j.at("output_path").get<std::string>();
    r.iterations = j.at("iterations").get<int64_t>();
    const json& o = j.at("optimizer");
    auto kind = optim::ParseOptimizerKind(o.at("kind").get<std::string>());
    if (!kind.ok()) return kind.status();
    r.optimizer.kind = *kind;
    r.optimizer.learning_rate = o.at("learning_rate").get<double>();
    r.optimizer.momentum = o.at("momentum").get<double>();
    r.optimizer.weight_decay = o.at("weight_decay").get<double>();
    r.optimizer.beta1 = o.at("beta1").get<double>();
    r.optimizer.beta2 = o.at("beta2").get<double>();
    r.optimizer.epsilon = o.at("epsilon").get<double>();
    if (j.contains("recipe")) {  // Absent in records made before recipes.
      const json& c = j.at("recipe");
      auto schedule = optim::ParseScheduleKind(c.value("lr_schedule", std::string("constant")));
      if (!schedule.ok()) return schedule.status();
      r.recipe.lr_schedule.kind = *schedule;
      r.recipe.lr_schedule.warmup_iterations = c.value("warmup_iterations", int64_t{0});
      r.recipe.lr_schedule.decay_iterations = c.value("decay_iterations", int64_t{0});
      r.recipe.lr_schedule.min_lr = c.value("min_lr", 0.0);
      r.recipe.lr_schedule.total_iterations = c.value("total_iterations", int64_t{0});
      r.recipe.clip_grad_norm = c.value("clip_grad_norm", 0.0);
      auto mode = ParseClipMode(c.value("clip_mode", std::string("auto")));
      if (!mode.ok()) return mode.status();
      r.recipe.clip_mode = *mode;
      r.recipe.no_decay = c.value("no_decay", std::string());
      r.recipe.no_decay_embeddings = c.value("no_decay_embeddings", false);
      r.recipe.eval_data = c.value("eval_data", std::string());
      r.recipe.eval_every = c.value("eval_every", int64_t{0});
      r.recipe.eval_iterations = c.value("eval_iterations", int64_t{0});
    }
    r.checkpoint_interval = j.at("checkpoint_interval").get<int64_t>();
    r.checkpoint_minutes = j.value("checkpoint_minutes", 0.0);
    r.keep_checkpoints = j.value("keep_checkpoints", 2);
    r.seed = j.at("seed").get<uint64_t>();
    if (j.contains("flush_denormal") && !j.at("flush_denormal").is_null()) {
      r.flush_denormal = j.at("flush_denormal").get<bool>();
    }
    r.num_devices = j.at("num_devices").get<int>();
    r.device_memory_bytes = j.at("device_memory_bytes").get<uint64_t>();
    r.host_memory_bytes = j.at("host_memory_bytes").get<uint64_t>();
    r.mode = j.at("mode").get<std::string>();
    r.devices = j.at("devices").get<std::vector<int>>();
    r.checkpoint_path = j.value("checkpoint_path", "");
    r.checkpoint_iteration = j.value("checkpoint_iteration", int64_t{0});
    r.resume_from = j.value("resume_from", "");
    r.resumed_from_iteration = j.value("resumed_from_iteration", int64_t{-1});
    r.kept_model_path = j.value("kept_model_path", "");
    if (j.contains("progress")) r.progress = ProgressFromJson(j.at("progress"));
    if (j.contains("world")) {
      const json& w = j.at("world");
      r.world.daemons = w.at("daemons").get<std::vector<std::string>>();
      r.world.rank = w.at("rank").get<int>();
      r.world.world_id = w.at("world_id").get<std::string>();
      r.world.store = w.at("store").get<std::string>();
      r.world.job_ids = w.at("job_ids").get<std::vector<std::string>>();
      r.world.shard_optimizer_state = w.at("shard_optimizer_state").get<bool>();
      r.world.timeout_s = w.at("timeout_s").get<double>();
      r.held = j.value("held", false);
    }
    return r;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

absl::StatusOr<JobStore> JobStore::Open(const std::string& dir) {
  std::error_code error;
  for (const char* sub : {"jobs", "plans", "models", "checkpoints", "kept", "trained", "data"}) {
    std::filesystem::create_directories(std::filesystem::path(dir) / sub, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat(
          "state directory ", dir, ": cannot create ", sub, "/: ", error.message()));
    }
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("state directory ", dir, " is not writable"));
  }
  return JobStore(dir);
}

absl::Status JobStore::Save(const JobRecord& record) const {
  return common::WriteFileAtomically(absl::StrCat(dir_, "/jobs/", record.id, ".json"),
                                     JobRecordToJson(record));
}

std::vector<JobRecord> JobStore::LoadAll(std::vector<std::string>* problems) const {
  std::vector<JobRecord> records;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/jobs", error)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".json") continue;
    auto text = common::ReadFileToString(path);
    if (!text.ok()) {
      problems->push_back(std::string(text.status().message()));
      continue;
    }
    auto record = JobRecordFromJson(*text);
    if (!record.ok()) {
      problems->push_back(absl::StrCat(path, ": ", record.status().message()));
      continue;
    }
    records.push_back(*std::move(record));
  }
  if (error) problems->push_back(absl::StrCat(dir_, "/jobs: ", error.message()));
  // Ids are "job-<n>": order by n.
  auto number = [](const JobRecord& r) {
    return std::atoll(r.id.c_str() + std::min<size_t>(r.id.size(), 4));
  };
  std::sort(records.begin(), records.end(),
            [&](const JobRecord& a, const JobRecord& b) { return number(a) < number(b); });
  return records;
}

absl::Status JobStore::AppendLog(const std::string& id, absl::string_view line) const {
  const std::string path = absl::StrCat(dir_, "/jobs/", id, ".log");
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
  out.flush();
  if (!out) return absl::ErrnoToStatus(errno, absl::StrCat("appending to ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> JobStore::ReadLog(const std::string& id) const {
  const std::string path = absl::StrCat(dir_, "/jobs/", id, ".log");
  if (!std::filesystem::exists(path)) return std::vector<std::string>{};
  HARMONY_ASSIGN_OR_RETURN(std::string text, common::ReadFileToString(path));
  return std::vector<std::string>(absl::StrSplit(text, '\n', absl::SkipEmpty()));
}

absl::Status JobStore::SavePlan(const std::string& id, const proto::Plan& plan) const {
  return common::WritePlanFile(absl::StrCat(dir_, "/plans/", id, ".pb"), plan);
}

absl::StatusOr<proto::Plan> JobStore::LoadPlan(const std::string& id) const {
  return common::ReadPlanFile(absl::StrCat(dir_, "/plans/", id, ".pb"));
}

absl::StatusOr<std::string> JobStore::SaveModel(const std::string& sha256,
                                                absl::string_view bytes) const {
  const std::string path = absl::StrCat(dir_, "/models/", sha256, ".pt");
  HARMONY_RETURN_IF_ERROR(common::WriteFileAtomically(path, bytes));
  return path;
}

absl::StatusOr<std::string> JobStore::SaveData(absl::string_view bytes,
                                               const std::string& file_name) const {
  const std::string suffix = std::filesystem::path(file_name).extension().string();
  const std::string path = absl::StrCat(dir_, "/data/", common::Sha256Hex(bytes),
                                        suffix.empty() ? ".pt" : suffix);
  if (!std::filesystem::exists(path)) {
    HARMONY_RETURN_IF_ERROR(common::WriteFileAtomically(path, bytes));
  }
  return path;
}

std::string JobStore::CheckpointDir(const std::string& id) const {
  return absl::StrCat(dir_, "/checkpoints/", id);
}

std::string JobStore::TensorBoardDir(const std::string& id) const {
  return absl::StrCat(dir_, "/tensorboard/", id);
}

std::string JobStore::KeptModelPath(const std::string& id) const {
  return absl::StrCat(dir_, "/kept/", id, ".pt");
}

std::string JobStore::TrainedModelPath(const std::string& id) const {
  return absl::StrCat(dir_, "/trained/", id, ".pt");
}

}  // namespace harmony::executor
