"""Repository rules that expose a LibTorch installation as @<name>//:torch.

libtorch_repository: the CPU LibTorch of Debian's libtorch-dev (headers under
include_dir, libraries on the linker's default path).

libtorch_cuda_repository: a CUDA-enabled LibTorch (the layout of PyTorch's
libtorch zip or of a pip wheel's torch/ folder: include/ and lib/), NCCL and
the CUDA runtime, located by --repo_env variables. A missing or incomplete
directory fails the build with a message that names the variable, the path
and the file that was expected.
"""

# The header trees of a LibTorch installation.
_TORCH_INCLUDE_SUBDIRS = ["ATen", "c10", "caffe2", "torch"]

def _link_headers(rctx, include_dir):
    for sub in _TORCH_INCLUDE_SUBDIRS:
        src = rctx.path(include_dir + "/" + sub)
        if src.exists:
            rctx.symlink(src, "include/" + sub)

_BUILD_TEMPLATE = """\
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "torch",
    hdrs = glob(["include/**"]),
    includes = [
        "include",
        "include/torch/csrc/api/include",
    ],
    defines = {defines},
    deps = {deps},
    # Operator registration lives in static initialisers of libtorch_cpu /
    # libtorch_cuda: keep the libraries even where no symbol is referenced.
    # (Bazel links with --no-as-needed already; this states it, and must not
    # be followed by --as-needed, which would drop later libraries.)
    linkopts = {linkopts},
)
"""

def _libtorch_impl(rctx):
    include_dir = rctx.attr.include_dir
    if not rctx.path(include_dir + "/torch/script.h").exists:
        fail("LibTorch headers not found: expected %s/torch/script.h. " % include_dir +
             "Run scripts/setup.sh (installs libtorch-dev).")
    _link_headers(rctx, include_dir)
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD.bazel", _BUILD_TEMPLATE.format(
        defines = "[]",
        deps = "[]",
        linkopts = repr([
            "-Wl,--no-as-needed",
            "-ltorch",
            "-ltorch_cpu",
            "-lc10",
            "-pthread",
        ]),
    ))

libtorch_repository = repository_rule(
    implementation = _libtorch_impl,
    attrs = {"include_dir": attr.string(mandatory = True)},
    local = True,
)

_LIBTORCH_VAR = "HARMONY_LIBTORCH_CUDA_DIR"
_NCCL_VAR = "HARMONY_NCCL_DIR"
_CUDA_VAR = "HARMONY_CUDA_DIR"

def _require(rctx, var, default, relpaths):
    d = rctx.os.environ.get(var, default)
    if not d:
        fail(("--config=cuda needs %s: pass --repo_env=%s=/path " % (var, var)) +
             "(or put it in user.bazelrc; see README, 'GPU build').")
    for rel in relpaths:
        if not rctx.path(d + "/" + rel).exists:
            fail("--config=cuda: %s=%s does not contain %s (expected %s/%s)." %
                 (var, d, rel, d, rel))
    return d

def _libtorch_cuda_impl(rctx):
    torch_dir = _require(rctx, _LIBTORCH_VAR, "", [
        "include/torch/script.h",
        "lib/libtorch_cuda.so",
        "lib/libc10_cuda.so",
    ])
    nccl_dir = _require(rctx, _NCCL_VAR, "", ["include/nccl.h", "lib/libnccl.so"])
    cuda_dir = _require(rctx, _CUDA_VAR, "/usr/local/cuda", [
        "include/cuda_runtime_api.h",
        "lib64/libcudart.so",
    ])
    _link_headers(rctx, torch_dir + "/include")
    for hdr in ["nccl.h"]:
        rctx.symlink(nccl_dir + "/include/" + hdr, "include/" + hdr)
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    lib_dirs = [torch_dir + "/lib", nccl_dir + "/lib", cuda_dir + "/lib64"]
    linkopts = []
    for d in lib_dirs:
        linkopts += ["-L" + d, "-Wl,-rpath," + d]
    linkopts += [
        "-Wl,--no-as-needed",
        "-ltorch",
        "-ltorch_cuda",
        "-ltorch_cpu",
        "-lc10_cuda",
        "-lc10",
        "-lnccl",
        "-lcudart",
        "-pthread",
    ]
    rctx.file("BUILD.bazel", _BUILD_TEMPLATE.format(
        defines = repr(["HARMONY_WITH_CUDA=1"]),
        deps = repr([":cuda_headers"]),
        linkopts = repr(linkopts),
    ) + """
cc_library(
    name = "cuda_headers",
    includes = ["cuda_include"],
    hdrs = glob(["cuda_include/**"]),
)
""")
    rctx.symlink(cuda_dir + "/include", "cuda_include")

libtorch_cuda_repository = repository_rule(
    implementation = _libtorch_cuda_impl,
    environ = [_LIBTORCH_VAR, _NCCL_VAR, _CUDA_VAR],
    local = True,
)
