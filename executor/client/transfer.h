// Files between harmony-ctl and the daemon, read and written with the
// caller's rights: a submission's model and data sent as bytes, and
// harmony-ctl fetch (a job's trained model or latest checkpoint).
//
// Thread-safety: as ExecutorClient.

#ifndef HARMONY_EXECUTOR_CLIENT_TRANSFER_H_
#define HARMONY_EXECUTOR_CLIENT_TRANSFER_H_

#include <string>

#include "absl/status/status.h"
#include "executor/client/client.h"
#include "proto/executor.pb.h"

namespace harmony::executor {

// Writes job `id`'s model (its latest checkpoint when `checkpoint`) to `out`
// (atomically); an existing `out` is refused (AlreadyExists) unless
// `overwrite`, and left as it was. Returns the bytes written in `bytes`.
absl::Status FetchTo(ExecutorClient& client, const std::string& id, const std::string& out,
                     bool checkpoint, bool overwrite, uint64_t* bytes);

// The request's model, data and evaluation data (empty: none): each file's
// bytes when it holds at most `limit` bytes, so the daemon opens nothing
// its caller names; its absolute path on the server when larger or when
// `by_path`. `upload_model`: the model's bytes whatever its size. Errors:
// a file to send that cannot be read.
absl::Status AttachFiles(const std::string& model, const std::string& data,
                         const std::string& eval_data, bool by_path, bool upload_model,
                         uint64_t limit, proto::SubmitJobRequest* request);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_CLIENT_TRANSFER_H_
