// TensorBoard event files (docs/DESIGN.md §6.6): the scalars of each
// iteration as `tensorboard --logdir DIR` reads them.
//
// A file `events.out.tfevents.<seconds>.<host>.<pid>` in DIR holds records,
// each framed as TFRecord frames them: the payload's length (uint64, little
// endian), the masked CRC-32C of those 8 bytes, the payload, the masked
// CRC-32C of the payload; masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
// The payload is a serialized Event (proto/tensorboard.proto): the first
// says file_version "brain.Event:2", each later one holds a Summary of
// simple scalar values at a step. Each write is flushed, so a run stopped
// at any point leaves a readable file.
//
// Thread-safety: one thread writes.

#ifndef HARMONY_EXECUTOR_RUNTIME_TENSORBOARD_H_
#define HARMONY_EXECUTOR_RUNTIME_TENSORBOARD_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "executor/runtime/metrics.h"

namespace harmony::executor {

// CRC-32C (Castagnoli) of `data`, and its masked form.
uint32_t Crc32c(absl::string_view data);
uint32_t MaskedCrc32c(absl::string_view data);

class EventWriter {
 public:
  // Creates DIR (and its parents) and a new event file in it.
  // PermissionDenied / Internal naming the path when it cannot.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Create(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  const std::string& path() const { return path_; }

  // One Event at `step` holding the (tag, value) scalars.
  absl::Status AddScalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);

  // An iteration's scalars at step iteration + 1: train/loss, train/lr,
  // train/grad_norm (with clipping), train/samples_per_s,
  // swap/host_link_bytes (both directions), device/peak_bytes (the highest
  // device's), swap/wait_s, swap/peer_wait_s (of that wait, on the other
  // devices), and eval/loss when it was evaluated.
  absl::Status AddIteration(const IterationMetrics& m);

 private:
  EventWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  absl::Status WriteRecord(const std::string& payload);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_TENSORBOARD_H_
