#!/usr/bin/env python3
"""Keeps the code's layout as docs/DESIGN.md describes it. Fails (exit 1, one
line per finding) on:

  - a source file in common/, planner/ or executor/ over 650 lines (a file
    that long usually holds two jobs: split it along its seam);
  - a "docs/DESIGN.md §N" (or §N.M) cited anywhere that docs/DESIGN.md has no
    section for;
  - work-log words in code and docs: issue or session numbers ("issue 12",
    "session 3"), which mean nothing to a user: say what was measured, when,
    on which commit and machine;
  - an include of planner/ from the executor's code (tests aside): the
    plan contract it runs lives in plan/.

Run as a test (tests:layout_test) or by hand: tests/check_layout.py [ROOT].
"""
import os
import re
import sys

MAX_LINES = 650
CODE_DIRS = ("common", "planner", "executor")
SOURCE_EXT = (".cc", ".h")
TEXT_EXT = (".cc", ".h", ".py", ".sh", ".proto", ".bazel", ".md", ".bzl", ".txt")
SKIP_DIRS = {".git", "third_party", ".gpu-deps"}
# Generated figures of a run (the report's text is checked where it is
# written: tests/bench/report*.cc).
SKIP_FILES = {"docs/bench/results.json"}
WORK_LOG = re.compile(r"\b(issues?|sessions?)\s+#?\d+", re.IGNORECASE)
CITATION = re.compile(r"DESIGN\.md §(\d+(?:\.\d+)?)")


def workspace(argv):
    if len(argv) > 1:
        return argv[1]
    # As a Bazel test: this file's runfile links to the source tree.
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def files(root):
    for d, dirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs
                   if x not in SKIP_DIRS and not x.startswith("bazel-") and not x.startswith(".")]
        for n in names:
            path = os.path.normpath(os.path.join(rel, n))
            if path not in SKIP_FILES:
                yield path


def design_sections(root):
    sections = set()
    with open(os.path.join(root, "docs/DESIGN.md"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#{2,3} (\d+(?:\.\d+)?)\.? ", line)
            if m:
                sections.add(m.group(1))
    return sections


def main(argv):
    root = workspace(argv)
    if not os.path.exists(os.path.join(root, "docs/DESIGN.md")):
        print(f"check_layout: {root}/docs/DESIGN.md is missing")
        return 1
    sections = design_sections(root)
    problems = []
    for path in sorted(files(root)):
        if not path.endswith(TEXT_EXT) or path == "tests/check_layout.py":
            continue
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                lines = f.read().split("\n")
        except (UnicodeDecodeError, OSError):
            continue
        top = path.split(os.sep)[0]
        if top in CODE_DIRS and path.endswith(SOURCE_EXT) and len(lines) - 1 > MAX_LINES:
            problems.append(f"{path}: {len(lines) - 1} lines (at most {MAX_LINES}: split it "
                            "along its seam)")
        for i, line in enumerate(lines, 1):
            for m in CITATION.finditer(line):
                if m.group(1) not in sections:
                    problems.append(f"{path}:{i}: cites docs/DESIGN.md §{m.group(1)}, which "
                                    "docs/DESIGN.md does not have")
            m = WORK_LOG.search(line)
            if m:
                problems.append(f"{path}:{i}: \"{m.group(0)}\": say what was measured, when, "
                                "on which commit and machine, not a work-log number")
            if (top == "executor" and path.endswith(SOURCE_EXT) and "_test" not in path
                    and "testing" not in path):
                inc = re.match(r'#include "(planner/[^"]+)"', line)
                if inc:
                    problems.append(f"{path}:{i}: the executor includes {inc.group(1)}: "
                                    "what it shares with the planner is the plan contract, plan/")
    for p in problems:
        print(p)
    print(f"check_layout: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
