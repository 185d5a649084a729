// Whether a model decomposed at a plan's cut points is the decomposition
// the plan recorded (proto::Decomposition). Cut points are node indices of
// forward's graph as the decomposer prepares it; another harmony-plan
// version may number the nodes otherwise, and the same cuts would then
// split the model elsewhere without any other error.

#ifndef HARMONY_COMMON_DECOMPOSITION_RECORD_H_
#define HARMONY_COMMON_DECOMPOSITION_RECORD_H_

#include "absl/status/status.h"
#include "proto/plan.pb.h"

namespace harmony::common {

class Decomposition;

// The record a plan keeps: `granularity` as asked for, the cut points, and
// per vLayer its scope, node range, parameters, buffers, live-ins, output
// count and flags.
proto::Decomposition RecordDecomposition(const Decomposition& d, int granularity);

// OK when every vLayer covers the recorded node range and reads the
// recorded parameters and buffers (a record without vLayers, from a plan
// that kept none, is not checked); else FailedPrecondition naming the
// first vLayer that differs and saying to plan again.
absl::Status CheckDecompositionRecord(const Decomposition& d,
                                      const proto::Decomposition& record);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_DECOMPOSITION_RECORD_H_
