"""External repositories of the Harmony build: all local, none downloaded.

Bazel 4.2.3 asks for @rules_cc, @rules_java and @remote_coverage_tools even for
plain C++ builds and `bazel test`; third_party/bazel/ holds tiny stand-ins
that forward to the native rules. System libraries from Debian packages are
wrapped in third_party/<lib>/BUILD.bazel; only LibTorch (whose C++ API headers
live in a non-default include directory) and the protobuf tools need a
repository of their own.
"""

load("//third_party:libtorch.bzl", "libtorch_cuda_repository", "libtorch_repository")
load("//third_party:system_tools.bzl", "system_tools_repository")

def harmony_repositories():
    native.local_repository(
        name = "rules_cc",
        path = "third_party/bazel/rules_cc",
    )
    native.local_repository(
        name = "rules_java",
        path = "third_party/bazel/rules_java",
    )
    native.local_repository(
        name = "remote_coverage_tools",
        path = "third_party/bazel/remote_coverage_tools",
    )

    # LibTorch 1.13 (CPU) from Debian's libtorch-dev.
    libtorch_repository(
        name = "libtorch",
        include_dir = "/usr/include",
    )

    # A CUDA-enabled LibTorch plus NCCL and the CUDA runtime, for
    # `--config=cuda`. Only fetched when that config selects it; the
    # directories come from --repo_env (see README, "GPU build").
    libtorch_cuda_repository(name = "libtorch_cuda")

    # protoc and grpc_cpp_plugin from protobuf-compiler and
    # protobuf-compiler-grpc.
    system_tools_repository(
        name = "system_protoc",
        tools = {
            "protoc": "/usr/bin/protoc",
            "grpc_cpp_plugin": "/usr/bin/grpc_cpp_plugin",
        },
    )
