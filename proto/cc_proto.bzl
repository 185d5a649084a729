"""harmony_cc_proto_library: C++ code for .proto files, generated with the
system protoc (and grpc_cpp_plugin for services), no download of rules_proto.

Imports are written from the workspace root (`import "proto/plan.proto";`),
generated headers are included the same way (`#include "proto/plan.pb.h"`).
"""

_PROTOC = "//third_party/protobuf:protoc"
_GRPC_PLUGIN = "//third_party/protobuf:grpc_cpp_plugin"

def harmony_cc_proto_library(
        name,
        srcs,
        deps = [],
        proto_deps = [],
        grpc = False,
        visibility = None):
    """Generates and compiles C++ for `srcs`.

    Args:
      name: the cc_library holding the generated code.
      srcs: .proto files of this package.
      deps: harmony_cc_proto_library targets whose protos `srcs` import.
      proto_deps: the .proto files of `deps` (protoc reads them to resolve
        imports).
      grpc: also run grpc_cpp_plugin (for files that define services).
      visibility: of the cc_library.
    """
    bases = [s[:-len(".proto")] for s in srcs]
    outs = [b + ".pb.h" for b in bases] + [b + ".pb.cc" for b in bases]
    if grpc:
        outs += [b + ".grpc.pb.h" for b in bases] + [b + ".grpc.pb.cc" for b in bases]
    tools = [_PROTOC]
    cmd = "$(location %s) --proto_path=. --cpp_out=$(GENDIR)" % _PROTOC
    if grpc:
        tools.append(_GRPC_PLUGIN)
        cmd += " --plugin=protoc-gen-grpc=$(location %s) --grpc_out=$(GENDIR)" % _GRPC_PLUGIN
    cmd += " " + " ".join(["$(location %s)" % s for s in srcs])
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + proto_deps,
        outs = outs,
        cmd = cmd,
        tools = tools,
        visibility = ["//visibility:private"],
    )
    lib_deps = deps + ["//third_party/protobuf"]
    if grpc:
        lib_deps.append("//third_party/grpc:grpc++")
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = lib_deps,
        visibility = visibility,
    )
