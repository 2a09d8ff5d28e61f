#!/usr/bin/env python3
"""Checks that every CUDA kernel can launch with the CTA size it declares, on every architecture.

For each .cu file this compiles the device code once for all given architectures
(`nvcc -fatbin -Xptxas -v --keep`, no host object, no GPU needed) and reads:
  * from ptxas' report (`-Xptxas -v`): each kernel's registers per thread and spill stores/loads;
  * from the PTX nvcc kept: each kernel's `.maxntid` (its __launch_bounds__ threads) and
    `.minnctapersm` (its minimum resident CTAs per SM), when declared.

It fails (exit 1, one line per problem) when a kernel
  * declares no __launch_bounds__ (no `.maxntid`): nothing ties its registers to its CTA size;
  * needs more registers per CTA than an SM has: the register file is allocated per warp in
    units of 256 registers, so a CTA of T threads with R registers needs
    ceil(T / 32) * round_up(32 R, 256) registers, which must be <= 65,536 (times `.minnctapersm`
    when declared) on every supported architecture (sm_75 .. sm_121); otherwise every launch
    fails with cudaErrorLaunchOutOfResources;
  * spills registers to local memory.
It prints one table row per (kernel, architecture). Standard library only.

Usage: check_kernel_resources.py --nvcc PATH --archs 80,89,90,100,120 [--flag=F ...] FILE.cu...
(tests/CMakeLists.txt registers it as the ctest `cuda.kernel_resources` with the build's flags.)
"""

import argparse
import concurrent.futures
import math
import os
import re
import subprocess
import sys
import tempfile

REGISTERS_PER_SM = 65536  # per SM and per CTA on sm_75 .. sm_121
REGISTER_UNIT = 256  # registers are allocated per warp in units of 256

ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+[a-z]?)'")
SPILL_RE = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
USED_RE = re.compile(r"Used (\d+) registers")
PTX_ENTRY_RE = re.compile(r"\.entry\s+([A-Za-z0-9_$]+)\s*\(")
MAXNTID_RE = re.compile(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
MINCTAS_RE = re.compile(r"\.minnctapersm\s+(\d+)")


def parse_ptxas(text):
    """{(kernel, sm): {'regs': R, 'spill_st': S, 'spill_ld': L}} from `ptxas -v` output."""
    out = {}
    current = None
    for line in text.splitlines():
        m = ENTRY_RE.search(line)
        if m:
            current = (m.group(1), m.group(2))
            out[current] = {"regs": None, "spill_st": 0, "spill_ld": 0}
            continue
        if current is None:
            continue
        m = SPILL_RE.search(line)
        if m:
            out[current]["spill_st"] = int(m.group(1))
            out[current]["spill_ld"] = int(m.group(2))
            continue
        m = USED_RE.search(line)
        if m:
            out[current]["regs"] = int(m.group(1))
            current = None
    return out


def parse_ptx(text):
    """{kernel: (max_threads or None, min_ctas_per_sm or None)} from one PTX file."""
    out = {}
    for m in PTX_ENTRY_RE.finditer(text):
        # The directives sit between the parameter list and the body's opening brace.
        body = text.find("{", m.end())
        close = text.rfind(")", m.end(), body)
        directives = text[close + 1 : body] if close >= 0 else ""
        ntid = MAXNTID_RE.search(directives)
        threads = None
        if ntid:
            threads = 1
            for g in ntid.groups():
                threads *= int(g) if g else 1
        ctas = MINCTAS_RE.search(directives)
        out[m.group(1)] = (threads, int(ctas.group(1)) if ctas else None)
    return out


def cta_registers(regs, threads):
    warps = math.ceil(threads / 32)
    return warps * math.ceil(regs * 32 / REGISTER_UNIT) * REGISTER_UNIT


def check_file(nvcc, archs, flags, source, workdir):
    gencode = []
    for i, arch in enumerate(archs):
        code = f"[sm_{arch},compute_{arch}]" if i == len(archs) - 1 else f"sm_{arch}"
        gencode += ["-gencode", f"arch=compute_{arch},code={code}"]
    keep = os.path.join(workdir, os.path.splitext(os.path.basename(source))[0])
    os.makedirs(keep, exist_ok=True)
    cmd = [nvcc, "-fatbin", *flags, *gencode, "-Xptxas", "-v", "--keep", "--keep-dir", keep,
           source, "-o", os.path.join(keep, "out.fatbin")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{source}: nvcc failed ({proc.returncode}):\n{' '.join(cmd)}\n"
                           f"{proc.stdout}{proc.stderr}")
    usage = parse_ptxas(proc.stdout + proc.stderr)
    bounds = {}  # (kernel, arch) -> (threads, min ctas)
    for arch in archs:
        ptx = [f for f in os.listdir(keep) if f.endswith(f".compute_{arch}.ptx")]
        if not ptx and len(archs) == 1:  # one target: nvcc names it <file>.ptx
            ptx = [f for f in os.listdir(keep) if f.endswith(".ptx")]
        if len(ptx) != 1:
            raise RuntimeError(f"{source}: expected one kept compute_{arch} PTX in {keep}, "
                               f"found {ptx}")
        with open(os.path.join(keep, ptx[0]), encoding="utf-8") as f:
            for kernel, b in parse_ptx(f.read()).items():
                bounds[(kernel, arch)] = b
    rows, problems = [], []
    kernels_per_arch = {arch: 0 for arch in archs}
    for (kernel, sm), u in sorted(usage.items()):
        arch = int(re.match(r"sm_(\d+)", sm).group(1))
        kernels_per_arch[arch] = kernels_per_arch.get(arch, 0) + 1
        threads, min_ctas = bounds.get((kernel, arch), (None, None))
        short = demangle_short(kernel)
        where = f"{os.path.basename(source)}: {short} on {sm}"
        regs = u["regs"]
        if regs is None:
            problems.append(f"{where}: no register count in ptxas' report")
            continue
        need = cta_registers(regs, threads) * (min_ctas or 1) if threads else None
        rows.append((os.path.basename(source), short, sm, regs, threads, min_ctas, need,
                     u["spill_st"], u["spill_ld"]))
        if threads is None:
            problems.append(f"{where}: no __launch_bounds__ (.maxntid), so its CTA size is "
                            f"unchecked ({regs} registers: at most {max_threads(regs)} threads "
                            f"per CTA)")
        elif need > REGISTERS_PER_SM:
            problems.append(
                f"{where}: {regs} registers x {threads} threads"
                f"{f' x {min_ctas} CTAs/SM' if min_ctas else ''} needs {need} registers "
                f"> {REGISTERS_PER_SM} (launch fails with cudaErrorLaunchOutOfResources)")
        if u["spill_st"] or u["spill_ld"]:
            problems.append(f"{where}: spills ({u['spill_st']} bytes stored, "
                            f"{u['spill_ld']} bytes loaded)")
    # Every __global__ in the file must show up on every architecture, so a parsing slip (or a
    # kernel ptxas never saw) cannot pass silently. (Each kernel is assumed to be a
    # non-template function: one __global__ = one entry.)
    with open(source, encoding="utf-8") as f:
        declared = len(re.findall(r"\b__global__\b", f.read()))
    for arch, n in sorted(kernels_per_arch.items()):
        if n != declared:
            problems.append(f"{os.path.basename(source)}: {declared} __global__ functions but "
                            f"{n} kernels in ptxas' report for sm_{arch}")
    return rows, problems


def demangle_short(name):
    """The kernel's own identifier from an Itanium-mangled name (enough for a report): the last
    <length><identifier> ending in '_kernel', else the whole name."""
    best = name
    i = 0
    while i < len(name):
        if name[i].isdigit() and (i == 0 or not name[i - 1].isdigit()):
            j = i
            while j < len(name) and name[j].isdigit():
                j += 1
            n = int(name[i:j])
            ident = name[j : j + n]
            if len(ident) == n and ident.endswith("_kernel") and ident.isidentifier():
                best = ident
            i = j
        else:
            i += 1
    return best


def max_threads(regs):
    """The largest CTA (whole warps) whose registers fit one SM."""
    per_warp = math.ceil(regs * 32 / REGISTER_UNIT) * REGISTER_UNIT
    return min(1024, REGISTERS_PER_SM // per_warp * 32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--archs", required=True,
                    help="real architectures, comma or semicolon separated (80,89,90,100,120); "
                         "the last also gets PTX")
    ap.add_argument("--flag", action="append", default=[], help="extra nvcc flag (repeatable)")
    ap.add_argument("--jobs", type=int, default=2, help="files compiled at once (default 2)")
    ap.add_argument("sources", nargs="+")
    args = ap.parse_args()
    archs = [int(a) for a in re.split(r"[,;]", args.archs) if a.strip()]
    all_rows, all_problems = [], []
    with tempfile.TemporaryDirectory(prefix="kvsim-ptxas-") as work:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(check_file, args.nvcc, archs, args.flag, src, work)
                       for src in args.sources]
            for future in futures:
                try:
                    rows, problems = future.result()
                except RuntimeError as e:
                    print(f"error: {e}", file=sys.stderr)
                    return 1
                all_rows += rows
                all_problems += problems
    header = ("file", "kernel", "arch", "regs", "threads", "min CTAs/SM", "regs needed",
              "spill st", "spill ld")
    table = [header] + [tuple("-" if v is None else str(v) for v in r) for r in all_rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    kernels = {(r[0], r[1]) for r in all_rows}
    if not kernels:
        all_problems.append("no kernel found in ptxas' report")
    for p in all_problems:
        print(f"FAIL: {p}")
    print(f"{len(kernels)} kernels x {len(archs)} architectures: "
          f"{'OK' if not all_problems else f'{len(all_problems)} problem(s)'}")
    return 1 if all_problems else 0


if __name__ == "__main__":
    sys.exit(main())
