// Whole-file reads, atomic writes and SHA-256 digests.
//
// Errors follow errno through absl::ErrnoToStatus (a missing file is
// NotFound, a forbidden one PermissionDenied, a full disk
// ResourceExhausted) and name the path.
//
// Thread-safety: stateless functions; concurrent writers of one path each
// leave a complete file (the last rename wins).

#ifndef HARMONY_COMMON_FILES_H_
#define HARMONY_COMMON_FILES_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::common {

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `contents` to a temporary file beside `path`, fsyncs it, renames it
// over `path` and fsyncs the directory: after a crash `path` holds either
// the old contents or the new, never a mix.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

// The same for a writer that writes a file itself (a serialiser streaming
// to it): `write` is given the temporary path beside `path` to write. A
// failed write leaves `path` as it was and no temporary file behind.
// Streaming straight to the file spares the in-memory copies of a
// serialised model (a GPT of 1.51 GiB: 14.0 s through a string, 3.1 s
// of it writing; common::SaveScriptModule).
absl::Status WriteFileAtomicallyWith(
    const std::string& path,
    const std::function<absl::Status(const std::string& tmp)>& write);

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// Raw 32-byte SHA-256 of `data`.
std::string Sha256Bytes(absl::string_view data);

// Lower-case hex SHA-256 of the file's contents, read in chunks.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_FILES_H_
