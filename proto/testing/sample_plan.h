// A small but complete plan (every message and most fields set) for tests of
// plan I/O: 2 devices, vPP, 4 vLayers in 2 backward packs.
//
// Thread-safety: stateless.

#ifndef HARMONY_PROTO_TESTING_SAMPLE_PLAN_H_
#define HARMONY_PROTO_TESTING_SAMPLE_PLAN_H_

#include "proto/plan.pb.h"

namespace harmony::proto::testing {

Plan MakeSamplePlan();

}  // namespace harmony::proto::testing

#endif  // HARMONY_PROTO_TESTING_SAMPLE_PLAN_H_
