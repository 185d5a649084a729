// The daemon's token by default (DaemonOptions): a random secret kept in
// STATE/token, readable only by the daemon's account (mode 0600), or by a
// group given with --token-group (0640); harmony-ctl finds it when it can
// read the state directory. Jupyter's token file works the same way.
//
// Thread-safety: functions of their arguments and the file system.

#ifndef HARMONY_EXECUTOR_SERVICE_DAEMON_TOKEN_H_
#define HARMONY_EXECUTOR_SERVICE_DAEMON_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "executor/client/client.h"

namespace harmony::executor {

// The token in STATE/token, made at the first start: 32 random bytes from
// /dev/urandom as 64 hex digits, written with mode 0600 (0640 and group
// `group` when not empty). An existing file is read and its mode set
// again (a token others can read is no secret). Errors name the file:
// the state directory cannot be made, the group does not exist, the file is
// empty or unreadable.
absl::StatusOr<std::string> LoadOrCreateToken(const std::string& state_dir,
                                              const std::string& group);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_SERVICE_DAEMON_TOKEN_H_
