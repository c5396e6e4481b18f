#!/bin/sh
# The code's shape as checks (issue 17): the environment holds only operator settings, no header
# include cycle, no product file past 900 lines, fcgi/ and cli/ see only the public headers, no test
# includes a .c file, no kernel switch besides the vendor's and the KV cache's type.
cd "$(dirname "$0")/../.." || exit 1
python3 - <<'PY'
import os, re, sys

def files(dirs, exts):
    for d in dirs:
        for root, _, names in os.walk(d):
            for n in sorted(names):
                if n.endswith(exts):
                    yield os.path.join(root, n)

def case(name, problems):
    if problems:
        print(f"FAIL {name}: " + "; ".join(problems[:8]))
    else:
        print(f"PASS {name}")

product = list(files(["opencl", "fcgi", "cli"], (".c", ".h", ".cl")))

# 1. getenv only for the device choice, the CLI's verbosity and the binary-cache directory
allowed = {"CLGEMMA_DEVICE", "CLGEMMA_VERBOSE", "XDG_CACHE_HOME", "HOME"}
bad = []
for f in product:
    for i, line in enumerate(open(f, errors="replace"), 1):
        for m in re.finditer(r'getenv\(\s*"([A-Z_0-9]+)"', line):
            if m.group(1) not in allowed:
                bad.append(f"{f}:{i} reads {m.group(1)}")
        if re.search(r'getenv\(\s*[^"\s]', line):
            bad.append(f"{f}:{i} reads a computed name")
case("structure_getenv_operator_only", bad)

# 2. no include cycle among the engine's, server's and CLI's own headers and sources
by_name = {}
for f in product:
    by_name.setdefault(os.path.basename(f), []).append(f)
edges = {}
for f in product:
    inc = re.findall(r'^\s*#\s*include\s+"([^"]+)"', open(f, errors="replace").read(), re.M)
    edges[f] = [t for name in inc for t in by_name.get(os.path.basename(name), [])]
state, cycles = {}, []
def visit(n, path):
    state[n] = 1
    for t in edges.get(n, []):
        if state.get(t) == 1:
            cycles.append(" -> ".join(path[path.index(t):] + [t]) if t in path else f"{n} -> {t}")
        elif t not in state:
            visit(t, path + [t])
    state[n] = 2
sys.setrecursionlimit(10000)
for n in edges:
    if n not in state:
        visit(n, [n])
case("structure_no_include_cycle", cycles)

# 3. product files stay small enough to hold one job
big = [f"{f} has {n} lines" for f in product if f.endswith((".c", ".h", ".cl"))
       for n in [sum(1 for _ in open(f, errors="replace"))] if n > 900]
case("structure_file_sizes", big)

# 4. the server and the CLI include only the public engine headers
public = set(os.listdir("opencl/include")) if os.path.isdir("opencl/include") else set()
own = {os.path.basename(f) for f in files(["fcgi", "cli"], (".h",))}
leaks = []
for f in files(["fcgi", "cli"], (".c", ".h")):
    for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', open(f, errors="replace").read(), re.M):
        if name not in public and name not in own:
            leaks.append(f"{f} includes {name}")
case("structure_public_headers_only", leaks)

# 5. tests link the libraries instead of including sources
inc_c = [f"{f} includes {m}" for f in files(["tests"], (".c", ".h"))
         for m in re.findall(r'^\s*#\s*include\s+"([^"]+\.c)"', open(f, errors="replace").read(), re.M)]
case("structure_tests_link_not_include", inc_c)

# 6. kernels switch only on the vendor and architecture (CLG_NVIDIA, CLG_SM90A: set by the runtime) and
#    the KV cache's type (CLG_KV, from engine_opts.kv_type), never on experiment knobs
knobs = []
for f in files(["opencl/kernels"], (".cl",)):
    for i, line in enumerate(open(f, errors="replace"), 1):
        m = re.match(r'\s*#\s*(if|ifdef|ifndef|elif)\b(.*)', line)
        if m and not re.search(r'CLG_NVIDIA|CLG_SM90A\b|CLG_KV\b', m.group(2)) and not re.search(r'_CL\b|_H\b', m.group(2)):
            knobs.append(f"{f}:{i} {line.strip()}")
case("structure_kernel_switches_vendor_only", knobs)
PY
