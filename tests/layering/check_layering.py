#!/usr/bin/env python3
"""The layering the build enforces (ctest -R layering; cmake/CodeboxLayering.cmake).

Usage: check_layering.py SOURCE_ROOT TARGETS_FILE

TARGETS_FILE has one line per CMake target: NAME|SOURCE_DIR|SOURCES|LINKS (lists split by
';'). The rules, for every file under src/:

  * a source file compiled by target T, in src/X, may include a header of src/Y (Y != X) only
    when T links, directly or through the targets it links, a target whose folder is src/Y;
  * a header in src/X (compiled by no target itself) may include a header of src/Y only when
    some target of src/X links one of src/Y that way;
  * nothing under src/ includes anything under tests/: test support that src/'s unit tests use
    is a test-only library under src/;
  * the layers below Box (LOWER_LAYERS) never include the public codebox/box.h: they use the
    small vocabulary headers (codebox/status.h, codebox/egress.h, ...);
  * the folders' libraries link in one direction: no chain of library links leaves a folder
    and comes back to it (a second library in a folder to dodge a cycle is still a cycle).

Exits 1 naming each file, the include and the target that would need the link; 0 when clean.
"""
import os
import re
import sys
import tempfile

# The folders below src/box: what they share with Box's users is a vocabulary header of its own.
LOWER_LAYERS = {"base", "protocol", "agent_client", "agent", "interpreter", "http", "net", "image",
                "jail", "vm", "options", "host_files"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_targets(path, src_root):
    targets = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, source_dir, sources, links = line.split("|", 3)
            files = []
            for s in filter(None, sources.split(";")):
                full = s if os.path.isabs(s) else os.path.join(source_dir, s)
                files.append(os.path.normpath(full))
            targets[name] = {
                "dir": os.path.normpath(source_dir),
                "files": files,
                "links": [l for l in links.split(";") if l],
            }
    return targets


def folder_of(path, src_root):
    """'box' for SRC/box/x.cc, None for a path outside src/."""
    rel = os.path.relpath(path, src_root)
    if rel.startswith(".."):
        return None
    return rel.split(os.sep)[0]


def closure(name, targets, memo):
    if name in memo:
        return memo[name]
    memo[name] = set()  # a cycle in links ends here
    seen = {name}
    for dep in targets[name]["links"]:
        if dep in targets:
            seen |= closure(dep, targets, memo)
    memo[name] = seen
    return seen


def check(root, targets_file):
    """The problems found in the tree at ROOT, and how many files were checked."""
    src_root = os.path.normpath(os.path.join(root, "src"))
    folders = sorted(d for d in os.listdir(src_root) if os.path.isdir(os.path.join(src_root, d)))
    targets = read_targets(targets_file, src_root)
    memo = {}

    # The folders each target may include from: its own and those of everything it links.
    reach = {}
    for name, t in targets.items():
        reach[name] = {folder_of(targets[d]["dir"], src_root) for d in closure(name, targets, memo)}
        reach[name].discard(None)

    compiled_by = {}
    for name, t in targets.items():
        for f in t["files"]:
            if f.startswith(src_root + os.sep):
                compiled_by.setdefault(f, []).append(name)
    folder_targets = {}
    for name, t in targets.items():
        x = folder_of(t["dir"], src_root)
        if x is not None:
            folder_targets.setdefault(x, []).append(name)

    problems = []
    checked = 0
    for dirpath, _, names in os.walk(src_root):
        for n in sorted(names):
            if not n.endswith((".cc", ".h")):
                continue
            path = os.path.join(dirpath, n)
            x = folder_of(path, src_root)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as f:
                includes = INCLUDE.findall(f.read())
            users = compiled_by.get(path)
            checked += 1
            for inc in includes:
                if inc.startswith("tests/"):
                    problems.append(f"{rel}: includes \"{inc}\": nothing under src/ includes "
                                    "tests/ (move the support into a test-only library in src/)")
                    continue
                if inc == "codebox/box.h" and x in LOWER_LAYERS:
                    problems.append(f"{rel}: includes \"codebox/box.h\": src/{x} is below Box "
                                    "and uses a vocabulary header (codebox/egress.h, ...)")
                    continue
                y = inc.split("/")[0]
                if "/" not in inc or y == x or y not in folders:
                    continue
                if users:
                    for t in users:
                        if y not in reach[t]:
                            problems.append(f"{rel}: includes \"{inc}\", but {t} links no "
                                            f"target of src/{y}")
                else:
                    owners = folder_targets.get(x, [])
                    if owners and not any(y in reach[t] for t in owners):
                        problems.append(f"{rel}: includes \"{inc}\", but no target of src/{x} "
                                        f"({', '.join(sorted(owners))}) links one of src/{y}")
    problems += folder_cycles(targets, src_root)
    return problems, checked if targets else 0


def folder_cycles(targets, src_root):
    """A problem for each cycle among src/'s folders through the links of libraries (targets
    that some target links: a test program links much but nothing links it)."""
    libraries = {d for t in targets.values() for d in t["links"] if d in targets}
    edges = {}  # folder -> {folder: (target, linked target)}
    for name in sorted(libraries):
        x = folder_of(targets[name]["dir"], src_root)
        for dep in targets[name]["links"]:
            y = folder_of(targets[dep]["dir"], src_root) if dep in targets else None
            if x and y and x != y:
                edges.setdefault(x, {}).setdefault(y, (name, dep))
    problems, seen = [], set()
    for start in sorted(edges):
        # Every path from `start` back to it, found once per set of folders.
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(edges.get(node, {})):
                if nxt == start:
                    key = frozenset(path)
                    if key not in seen:
                        seen.add(key)
                        hops = [f"{edges[a][b][0]} -> {edges[a][b][1]}"
                                for a, b in zip(path, path[1:] + [start])]
                        problems.append(f"src/{start}: its libraries' links come back to it "
                                        f"({'; '.join(hops)})")
                elif nxt not in path and nxt > start:
                    stack.append((nxt, path + [nxt]))
    return problems


def self_test():
    """The checker on a small tree of its own: one of each kind of break is found, and the
    includes that follow a link are not. None when it works, else what went wrong."""
    with tempfile.TemporaryDirectory() as root:
        files = {
            "src/low/low.h": "",
            "src/low/low.cc": '#include "low/low.h"\n',
            "src/high/high.cc": '#include "low/low.h"\n',        # high links low: fine
            "src/low/bad.cc": '#include "high/high.h"\n',        # low links no high: a break
            "src/high/high.h": '#include "low/low.h"\n',
            "src/low/uses_tests.cc": '#include "tests/x/y.h"\n',  # src/ includes tests/
            "src/net/relay.cc": '#include "codebox/box.h"\n',    # below Box: a break
            "src/high/uses_box.cc": '#include "codebox/box.h"\n',  # above it: fine
            "src/loop_a/a.cc": "", "src/loop_a/a_core.cc": "", "src/loop_b/b.cc": "",
        }
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        targets_file = os.path.join(root, "targets.txt")
        with open(targets_file, "w", encoding="utf-8") as f:
            f.write(f"lib_low|{root}/src/low|low.cc;bad.cc;uses_tests.cc|\n"
                    f"lib_high|{root}/src/high|high.cc;uses_box.cc|lib_low;$<BUILD_INTERFACE:x>\n"
                    f"lib_net|{root}/src/net|relay.cc|\n"
                    # loop_a's second library dodges nothing: a -> b -> a_core is a cycle.
                    f"lib_a|{root}/src/loop_a|a.cc|lib_b\n"
                    f"lib_b|{root}/src/loop_b|b.cc|lib_a_core\n"
                    f"lib_a_core|{root}/src/loop_a|a_core.cc|\n"
                    # A test program of src/low that links high is no cycle: nothing links it.
                    f"low_test|{root}/src/low||lib_high;lib_a\n")
        problems, _ = check(root, targets_file)
        wanted = ["src/low/bad.cc: includes \"high/high.h\", but lib_low links no target of src/high",
                  "src/low/uses_tests.cc: includes \"tests/x/y.h\"",
                  "src/net/relay.cc: includes \"codebox/box.h\"",
                  "src/loop_a: its libraries' links come back to it (lib_a -> lib_b; "
                  "lib_b -> lib_a_core)"]
        for w in wanted:
            if not any(p.startswith(w) for p in problems):
                return f"the checker missed: {w} (it found: {problems})"
        if len(problems) != len(wanted):
            return f"the checker found more than the planted breaks: {problems}"
    return None


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    broken = self_test()
    if broken:
        print(f"layering: the checker itself is wrong: {broken}")
        return 1
    problems, checked = check(sys.argv[1], sys.argv[2])
    if checked == 0:
        print("layering: nothing was checked (wrong SOURCE_ROOT or TARGETS_FILE?)")
        return 1
    if problems:
        print(f"layering: {len(problems)} include(s) break the layering:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"layering: {checked} files under src/: every include follows a link, none reaches "
          "tests/, no folder's libraries link back to it (and the checker finds the breaks planted in a tree of its own)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
