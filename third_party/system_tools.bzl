"""Exposes installed executables (protoc, grpc_cpp_plugin) as Bazel labels."""

def _system_tools_impl(rctx):
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, path in rctx.attr.tools.items():
        if not rctx.path(path).exists:
            fail("%s not found at %s. Run scripts/setup.sh." % (name, path))
        rctx.symlink(path, name + ".bin")
        lines.append('sh_binary(name = "%s", srcs = ["%s.bin"])' % (name, name))
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD.bazel", "\n".join(lines) + "\n")

system_tools_repository = repository_rule(
    implementation = _system_tools_impl,
    attrs = {"tools": attr.string_dict(mandatory = True)},
    local = True,
)
