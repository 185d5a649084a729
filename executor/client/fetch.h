// harmony-ctl fetch: a job's trained model (or latest checkpoint) from the
// daemon, written by the caller with the caller's own rights.
//
// Thread-safety: as ExecutorClient.

#ifndef HARMONY_EXECUTOR_CLIENT_FETCH_H_
#define HARMONY_EXECUTOR_CLIENT_FETCH_H_

#include <string>

#include "absl/status/status.h"
#include "executor/client/client.h"

namespace harmony::executor {

// Writes job `id`'s model (its latest checkpoint when `checkpoint`) to `out`
// (atomically); an existing `out` is refused (AlreadyExists) unless
// `overwrite`, and left as it was. Returns the bytes written in `bytes`.
absl::Status FetchTo(ExecutorClient& client, const std::string& id, const std::string& out,
                     bool checkpoint, bool overwrite, uint64_t* bytes);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_CLIENT_FETCH_H_
