// Values tasks send each other within an iteration (docs/DESIGN.md §6): a
// sender posts one piece per microbatch it computed (samples [offset,
// offset + size) of the minibatch); a receiver asks for its own microbatch's
// samples and waits until pieces cover them, assembling rows from several
// pieces where the two tasks' microbatches differ. Tensors stay where the
// sender put them (the sender copies to the receiver's device, or to the
// host for the receiver's copy-in stream).
//
// Thread-safety: thread-safe.

#ifndef HARMONY_EXECUTOR_RUNTIME_MAILBOX_H_
#define HARMONY_EXECUTOR_RUNTIME_MAILBOX_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/core/ivalue.h>

#include "absl/status/statusor.h"

namespace harmony::executor {

// A tensor of the decomposed graph: output `second` of vLayer `first`, or
// forward's argument `second` when `first` is -1 (-2: the loss's targets).
using Ref = std::pair<int, int>;

// Values a task sends another for one of its microbatches.
struct Piece {
  int offset = 0;
  int size = 0;
  std::map<Ref, c10::IValue> values;
};

class Mailbox {
 public:
  // Whether a value has the microbatch as dimension 0 (is split by rows
  // when assembled); others are taken from the first piece.
  using IsBatched = std::function<bool(const Ref&, const c10::IValue&, int size)>;
  explicit Mailbox(IsBatched is_batched) : is_batched_(std::move(is_batched)) {}

  // `kind` tells apart what one task sends another (activations, stashes).
  void Post(int to, int from, int kind, Piece piece);

  // The values `from` sent `to` for samples [offset, offset + size),
  // waiting for them; pieces wholly consumed are dropped. Cancelled once
  // Stop was called.
  absl::StatusOr<std::map<Ref, c10::IValue>> Receive(int to, int from, int kind, int offset,
                                                      int size);

  // Wakes every receiver with Cancelled, until Reset.
  void Stop();
  // Empties the boxes and opens them again (a new iteration).
  void Reset();

 private:
  const IsBatched is_batched_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, std::vector<Piece>> boxes_;  // Guarded by mu_.
  bool stopped_ = false;                                           // Guarded by mu_.
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_MAILBOX_H_
