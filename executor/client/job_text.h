// Jobs as harmony-ctl shows them to people: a job in detail (its world and
// every rank's state included), the job list, the devices, a progress line,
// and any message as JSON (--json).
//
// Thread-safety: stateless; the Print functions write to std::cout.

#ifndef HARMONY_EXECUTOR_CLIENT_JOB_TEXT_H_
#define HARMONY_EXECUTOR_CLIENT_JOB_TEXT_H_

#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "proto/executor.pb.h"

namespace harmony::executor {

// The message as indented JSON with the proto's field names.
std::string ToJson(const google::protobuf::Message& m);
// "RUNNING", ...
std::string StateName(int state);
// SUCCEEDED, FAILED or CANCELLED.
bool Ended(int state);
// "iteration 3/10  loss 0.1234  ...", after a bar of '#' when `bar`.
std::string ProgressLine(const proto::Progress& p, bool bar);

void PrintJob(const proto::Job& j);
void PrintList(const std::vector<proto::Job>& jobs);
void PrintDevices(const proto::GetDevicesResponse& d);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_CLIENT_JOB_TEXT_H_
