#!/usr/bin/env python3
"""Write summary.md of bench/gpu_check.sh from whatever the check produced.

Usage:
  summarize_gpu_bench.py -o summary.md [--bench bench_cuda.json] [--tests cuda_tests.json]
      [--tests-log cuda_tests.txt] [--excluded-tests A.B,C.D] [--gpu gpu.csv] [--no-gpu]
      [--steps steps.tsv] [--replay META.json ...] [--meta KEY=VALUE ...]

Every input may be missing, empty or cut short (a benchmark binary killed by its timeout leaves
its JSON truncated): the summary is still written, and says for each part what is missing and
why. The summarizer never fails because of its inputs: it writes the summary, prints PASS, NO_GPU
or FAIL on the first line of stdout (gpu_check.sh maps them to exit status 0, 2 and 1) and the
reason on the second, and exits 0 (2 only for bad command-line arguments).

The summary has: the result line; the steps of the check (steps.tsv from gpu_check.sh: step,
status, seconds, detail); the CUDA tests (run, failed, skipped; with a GPU present every skip is
a failure, tests that only make sense without a GPU are excluded by gpu_check.sh and named
here); the targets of issue 7 (per target: the rows judged, each row's measured value, the
same-run baseline, met / MISSED / no GPU / error / not measured); the end-to-end replays; and
every benchmark row, errors included.

Python standard library only (the GPU machine's image has python3, nothing is installed there).
"""
import argparse
import json
import re
import sys
import traceback

NO_DEVICE_ERROR = "no CUDA device"


def read_text(path):
    """The file's text, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def load_json_tolerant(path):
    """(data, note) for a JSON file that may be missing, empty or truncated.

    A truncated Google Benchmark file keeps its complete rows: the "context" object and each
    complete element of "benchmarks" are decoded one by one. note is "" when the file was whole.
    """
    if not path:
        return None, "not given"
    text = read_text(path)
    if text is None:
        return None, "missing"
    if not text.strip():
        return None, "empty"
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as e:
        whole_error = f"invalid JSON ({e.msg} at line {e.lineno} column {e.colno})"
    dec = json.JSONDecoder()
    data = {}
    m = re.search(r'"context"\s*:\s*', text)
    if m:
        try:
            data["context"], _ = dec.raw_decode(text, m.end())
        except json.JSONDecodeError:
            pass
    m = re.search(r'"benchmarks"\s*:\s*\[', text)
    rows = []
    if m:
        pos = m.end()
        while True:
            while pos < len(text) and text[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(text) or text[pos] != "{":
                break
            try:
                obj, pos = dec.raw_decode(text, pos)
            except json.JSONDecodeError:
                break
            rows.append(obj)
        data["benchmarks"] = rows
    if not data:
        return None, whole_error
    return data, f"{whole_error}: recovered {len(rows)} complete rows"


def fnum(v, digits=1):
    if v is None:
        return ""
    try:
        return f"{float(v):,.{digits}f}"
    except (TypeError, ValueError):
        return str(v)


def cell(s):
    """Text safe inside a markdown table cell, on one line."""
    s = " ".join(str(s).split())
    return s.replace("|", "\\|")


def context_float(ctx, key):
    try:
        return float(ctx[key])
    except (KeyError, TypeError, ValueError):
        return None


# --- the targets of issue 7 -------------------------------------------------------------------
# Rows are selected by their names (argument names are part of them), so a row that failed before
# setting its label is still found. "size" is what one iteration moves, read + written.
TARGETS = [
    {
        "name": "write_kv >= 90 % of D2D, prefill rows",
        "rows": [("BM_WriteKv/model:0/tokens:8192", "llama-3.1-8b prefill, 8192 tokens x 32 layers, 2048 MiB"),
                 ("BM_WriteKv/model:1/tokens:8192", "qwen2.5-7b prefill, 8192 tokens x 28 layers, 896 MiB")],
        "key": "pct_of_d2d", "unit": "% of D2D", "goal": 90.0, "baseline": "d2d",
    },
    {
        "name": "copy_blocks >= 90 % of D2D, 64 and 1024 blocks",
        "rows": [("BM_CopyBlocks/blocks:64", "64 blocks x 2 MiB, 256 MiB"),
                 ("BM_CopyBlocks/blocks:1024", "1024 blocks x 2 MiB, 4096 MiB")],
        "key": "pct_of_d2d", "unit": "% of D2D", "goal": 90.0, "baseline": "d2d",
    },
    {
        "name": "gather_kv at block size 16 >= 80 % of D2D",
        "rows": [("BM_GatherKv/bs:16", "256 seqs x 512 tokens x 8 layers, 4096 MiB read")],
        "key": "pct_of_d2d", "unit": "% of D2D", "goal": 80.0, "baseline": "d2d",
    },
    {
        "name": "GPU allocator >= 1 G blocks/s, 1024 requests",
        "rows": [("BM_GpuAllocator/requests:1024/demand:16", "1024 requests x 16 blocks")],
        "key": "Gblocks_per_s", "unit": "G blocks/s", "goal": 1.0, "baseline": None,
    },
    {
        "name": "swap vs pinned cudaMemcpy (issue 7 sets no number)",
        "rows": [("BM_Swap/in:0/blocks:256", "swap_out 256 blocks, 512 MiB to host"),
                 ("BM_Swap/in:1/blocks:256", "swap_in 256 blocks, 512 MiB to device")],
        "key": "pct_of_pinned", "unit": "% of pinned", "goal": None, "baseline": "pinned",
    },
]


def base_name(row):
    """Row name without Google Benchmark's /manual_time, /real_time, ... suffixes."""
    name = row.get("run_name") or row.get("name", "")
    return re.sub(r"/(manual_time|real_time|process_time|iterations:\d+|repeats:\d+)$", "", name)


def judged_by(rows_name):
    for t in TARGETS:
        for prefix, _ in t["rows"]:
            if rows_name == prefix:
                return t["name"].split(" ")[0]
    return ""


def judge(target, by_name, no_gpu, bench_note, baselines):
    """(judged rows text, measured text, baseline text, verdict) of one target."""
    judged, measured, errors, missing = [], [], [], []
    for prefix, what in target["rows"]:
        judged.append(f"`{prefix}` ({what})")
        row = by_name.get(prefix)
        if row is None:
            missing.append(prefix)
        elif row.get("error_occurred"):
            errors.append(f"{prefix}: {row.get('error_message', '?')}")
        elif target["key"] not in row:
            errors.append(f"{prefix}: no {target['key']} counter")
        else:
            measured.append(float(row[target["key"]]))
    digits = 3 if target["key"] == "Gblocks_per_s" else 1
    measured_txt = ", ".join(f"{v:.{digits}f}" for v in measured)
    if measured_txt:
        measured_txt += " " + target["unit"]
    if target["baseline"] == "d2d":
        baseline_txt = baselines["d2d"]
    elif target["baseline"] == "pinned":
        baseline_txt = baselines["pinned"]
    else:
        baseline_txt = "absolute"
    if no_gpu and (errors or missing) and not measured:
        verdict = "no GPU"
    elif errors:
        verdict = "error: " + "; ".join(errors)
    elif missing:
        verdict = f"not measured ({', '.join(missing)} absent: {bench_note})"
    elif target["goal"] is None:
        verdict = "reported (no target)"
    else:
        verdict = "met" if min(measured) >= target["goal"] else "MISSED"
        verdict += f" (worst {min(measured):.{digits}f} vs goal {target['goal']:g})"
    return "<br>".join(judged), measured_txt, baseline_txt, verdict


def gtest_summary(tests_json, tests_log, excluded, no_gpu):
    """(lines, problems) for the CUDA tests."""
    lines, problems = [], []
    data, note = load_json_tolerant(tests_json)
    excluded_txt = ", ".join(f"`{t}`" for t in excluded) if excluded else "none"
    if data is not None and "testsuites" in data:
        cases = [c for s in data.get("testsuites", []) for c in s.get("testsuite", [])]
        skipped = [f"{c.get('classname', '?')}.{c.get('name', '?')}" for c in cases
                   if c.get("result") == "SKIPPED"]
        failed = [f"{c.get('classname', '?')}.{c.get('name', '?')}" for c in cases
                  if c.get("failures")]
        run = sum(1 for c in cases if c.get("status", "RUN") == "RUN")
        passed = run - len(failed) - len(skipped)
        lines.append(f"CUDA tests: {run} run: {passed} passed, {len(failed)} failed, "
                     f"{len(skipped)} skipped; "
                     f"excluded as no-GPU-only (they skip by design when a GPU is present): "
                     f"{excluded_txt}")
        if failed:
            lines.append("Failed: " + ", ".join(f"`{t}`" for t in failed))
            problems.append(f"{len(failed)} CUDA test(s) failed")
        if skipped:
            lines.append("Skipped: " + ", ".join(f"`{t}`" for t in skipped))
            if not no_gpu:
                problems.append(f"{len(skipped)} CUDA test(s) skipped although a GPU is present")
        return lines, problems
    # No usable JSON: the binary crashed, timed out or never ran. Read what the text log says.
    lines.append(f"CUDA tests: no result JSON ({note})")
    problems.append("CUDA tests produced no result JSON")
    log = read_text(tests_log) if tests_log else None
    if log:
        failed = re.findall(r"^\[  FAILED  \] (\S+\.\S+)", log, re.M)
        started = re.findall(r"^\[ RUN      \] (\S+)", log, re.M)
        ended = set(re.findall(r"^\[ +(?:OK|FAILED|SKIPPED) +\] (\S+)", log, re.M))
        unfinished = [t for t in started if t not in ended]
        if failed:
            lines.append("Failed (from the log): " + ", ".join(f"`{t}`" for t in sorted(set(failed))))
        if unfinished:
            lines.append(f"Started but never finished (crash or timeout): `{unfinished[-1]}`")
    return lines, problems


def replay_summary(meta_path, no_gpu):
    """(table row, problem or None) of one end-to-end replay."""
    meta, note = load_json_tolerant(meta_path)
    if meta is None:
        return f"| ? | not run ({cell(note)}: {cell(meta_path)}) | | | | |", "replay: no record"
    backend = meta.get("backend", "?")
    rc = meta.get("rc")
    report, rnote = load_json_tolerant(meta.get("report_json"))
    err = (read_text(meta.get("stderr")) or "").strip().splitlines() if meta.get("stderr") else []
    err_line = next((l for l in reversed(err) if "error" in l.lower()), err[-1] if err else "")
    wall = fnum(meta.get("seconds"), 2) + " s" if meta.get("seconds") is not None else ""
    cmd = f"`{cell(meta.get('command', '?'))}`"
    if rc is None:
        return f"| {backend} | {cmd} | not run | {wall} | | {cell(meta.get('reason', ''))} |", None
    if report is not None and rc == 0 and report.get("backend_verification_ok") is True:
        slots = report.get("backend_slots_checked", 0)
        dev = report.get("backend_device_seconds", 0.0)
        moved = report.get("backend_bytes_read", 0) + report.get("backend_bytes_written", 0)
        gbps = moved / dev / 1e9 if dev else 0.0
        layers = f"{report.get('backend_layers', '?')} of {report.get('num_layers', '?')} layers"
        detail = (f"{report.get('requests', '?')} requests, {report.get('steps', '?')} steps; backend "
                  f"{dev:.3f} s device time, {moved / 2**30:.2f} GiB moved ({gbps:.1f} GB/s), "
                  f"{layers}; {slots} slots checked")
        ok = slots > 0
        verdict = "verified" if ok else "FAILED: verify() checked no slot"
        return (f"| {backend} | {cmd} | {verdict} | {wall} | rc {rc} | {cell(detail)} |",
                None if ok else f"replay --backend {backend}: no slot verified")
    if backend == "cuda" and no_gpu:
        return (f"| {backend} | {cmd} | no GPU | {wall} | rc {rc} | {cell(err_line)} |", None)
    why = err_line or (f"report: {rnote}" if report is None else
                       f"verification: {report.get('backend_verification', '?')}")
    return (f"| {backend} | {cmd} | FAILED | {wall} | rc {rc} | {cell(why)} |",
            f"replay --backend {backend} failed (rc {rc})")


def read_steps(path):
    rows = []
    text = read_text(path) if path else None
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0]:
            rows.append((parts[0], parts[1], parts[2], parts[3] if len(parts) > 3 else ""))
    return rows


def build_summary(args):
    out, problems = [], []
    meta = dict(m.split("=", 1) for m in args.meta if "=" in m)
    gpu_lines = []
    gpu_text = read_text(args.gpu) if args.gpu else None
    if gpu_text:
        gpu_lines = [l.strip() for l in gpu_text.splitlines() if l.strip()]
    bench, bench_note = load_json_tolerant(args.bench)
    ctx = (bench or {}).get("context", {})
    all_rows = [b for b in (bench or {}).get("benchmarks", [])
                if b.get("run_type", "iteration") == "iteration"]
    no_gpu = args.no_gpu or ctx.get("cuda_device_count") == "0"
    if all_rows and all(NO_DEVICE_ERROR in b.get("error_message", "") for b in all_rows):
        no_gpu = True
    # nvidia-smi listed a GPU that the CUDA runtime cannot use (driver too old, no device node):
    # always a failure, never a dry run.
    runtime_only = no_gpu and not args.no_gpu
    if runtime_only:
        problems.append("nvidia-smi lists a GPU but the CUDA runtime reports none (" +
                        ctx.get("device_error", "see the benchmark rows' errors") + ")")
    by_name = {}
    for b in all_rows:
        by_name.setdefault(base_name(b), b)

    # Steps first: they say why later parts may be missing.
    steps = read_steps(args.steps)
    for name, status, _, detail in steps:
        if status not in ("ok", "skipped", "no GPU"):
            problems.append(f"step {name}: {status}" + (f" ({detail})" if detail else ""))

    test_lines, test_problems = gtest_summary(args.tests, args.tests_log,
                                              [t for t in args.excluded_tests.split(",") if t],
                                              no_gpu)
    problems += test_problems

    d2d = context_float(ctx, "d2d_ceiling_GBps")
    h2d = context_float(ctx, "pinned_h2d_GBps")
    d2h = context_float(ctx, "pinned_d2h_GBps")
    baselines = {
        "d2d": (f"D2D {d2d:,.1f} GB/s (read + write, same run)" if d2d else
                "D2D: " + ("no GPU" if no_gpu else ctx.get("d2d_ceiling_GBps", "not measured"))),
        "pinned": (f"pinned D2H {d2h:,.1f} / H2D {h2d:,.1f} GB/s across the link (same run, "
                   "each way; the rows' GB/s count read + write, twice that)"
                   if d2h and h2d else
                   "pinned: " + ("no GPU" if no_gpu else ctx.get("pinned_h2d_GBps", "not measured"))),
    }
    if bench is None:
        bench_status = f"no benchmark JSON ({bench_note})"
        if not no_gpu:
            problems.append(bench_status)
    else:
        errs = [b for b in all_rows if b.get("error_occurred")]
        bench_status = f"{len(all_rows)} rows, {len(errs)} with an error"
        if bench_note:
            bench_status += f"; JSON {bench_note}"
            if not no_gpu:
                problems.append(f"benchmark JSON {bench_note}")
        if errs and not no_gpu:
            problems.append(f"{len(errs)} benchmark row(s) with an error")

    target_rows = []
    for t in TARGETS:
        judged, measured, base, verdict = judge(t, by_name, no_gpu, bench_status, baselines)
        target_rows.append(f"| {cell(t['name'])} | {judged} | {cell(measured)} | {cell(base)} | "
                           f"{cell(verdict)} |")

    replay_rows = []
    for path in args.replay:
        row, problem = replay_summary(path, no_gpu)
        replay_rows.append(row)
        if problem:
            problems.append(problem)

    if no_gpu and not problems:
        verdict = "NO_GPU"
        result = ("NO GPU (dry run): every GPU row reads \"no GPU\"; everything that runs without "
                  "a GPU ran and passed")
    elif problems:
        verdict = "FAIL"
        result = ("FAIL" + (" (no GPU visible)" if no_gpu and not runtime_only else "") + ": " +
                  "; ".join(problems))
    else:
        verdict = "PASS"
        result = "PASS: build, CUDA tests (no skips), every benchmark row and the end-to-end replay ok"

    out.append("# kvsim GPU check\n")
    out.append(f"**Result: {cell(result)}**\n")
    out.append("GPU: " + ("`" + " / ".join(gpu_lines) + "`" if gpu_lines else "not reported") +
               ("" if not no_gpu else " (no NVIDIA GPU visible)"))
    out.append("")
    facts = [f"{k}: {v}" for k, v in meta.items()]
    for key in ("device_name", "compute_capability", "sm_count", "l2_bytes", "l2_flush",
                "device_error"):
        if key in ctx:
            facts.append(f"{key}: {ctx[key]}")
    if "date" in ctx:
        facts.append(f"benchmark date: {ctx['date']}")
    if facts:
        out.append("; ".join(facts) + "\n")
    out.append(f"Baselines: {baselines['d2d']}; {baselines['pinned']}\n")

    out.append("## Steps\n")
    out.append("| step | status | seconds | detail |")
    out.append("|---|---|---:|---|")
    for name, status, secs, detail in steps:
        out.append(f"| {cell(name)} | {cell(status)} | {cell(secs)} | {cell(detail)} |")
    if not steps:
        out.append("| (no steps recorded) | | | |")
    out.append("")
    out += [l + "\n" for l in test_lines]
    out.append(f"GPU benchmarks: {cell(bench_status)}\n")

    out.append("## Targets (issue 7, H200; ratios to baselines measured in the same run)\n")
    out.append("| target | judged rows | measured | baseline | verdict |")
    out.append("|---|---|---|---|---|")
    out += target_rows
    out.append("")
    out.append("Other rows are reported, not judged: the write_kv decode rows (64 MiB and 28 MiB, "
               "where launch and tail effects dominate), copy_blocks of 1 block, gather_kv at larger "
               "block sizes, the 1024 x 1 allocator row (one launch's latency caps it) and the "
               "16-block swaps.\n")

    out.append("## End-to-end replay (`kvsim replay`, verify() over every slot)\n")
    out.append("| backend | command | result | wall | exit | detail |")
    out.append("|---|---|---|---:|---|---|")
    out += replay_rows or ["| | not run | | | | |"]
    out.append("")

    out.append("## Every benchmark row\n")
    out.append("| benchmark | label | judged for | MiB/iter | GB/s | % of D2D | % of pinned | "
               "G blocks/s | time/iter | error |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for b in all_rows:
        err = b.get("error_message", "") if b.get("error_occurred") else ""
        t = "" if err else f"{float(b.get('real_time', 0.0)):.4g} {b.get('time_unit', '')}"
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            cell(base_name(b)), cell(b.get("label", "")), judged_by(base_name(b)),
            fnum(b.get("MiB")), fnum(b.get("GBps")), fnum(b.get("pct_of_d2d")),
            fnum(b.get("pct_of_pinned")), fnum(b.get("Gblocks_per_s"), 3), t, cell(err)))
    if not all_rows:
        out.append(f"| (no rows: {cell(bench_status)}) | | | | | | | | | |")
    return "\n".join(out) + "\n", verdict, result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True, help="summary.md to write")
    ap.add_argument("--bench", help="bench_cuda_kernels' Google Benchmark JSON")
    ap.add_argument("--tests", help="kvsim_cuda_tests' --gtest_output JSON")
    ap.add_argument("--tests-log", help="kvsim_cuda_tests' console output")
    ap.add_argument("--excluded-tests", default="",
                    help="comma-separated tests excluded by the GPU run's filter")
    ap.add_argument("--gpu", help="nvidia-smi --query-gpu CSV")
    ap.add_argument("--no-gpu", action="store_true", help="no NVIDIA GPU was visible")
    ap.add_argument("--steps", help="TSV of the check's steps: name, status, seconds, detail")
    ap.add_argument("--replay", action="append", default=[],
                    help="JSON record of one end-to-end replay (repeatable)")
    ap.add_argument("--meta", action="append", default=[], help="KEY=VALUE shown at the top")
    args = ap.parse_args(argv)
    try:
        text, verdict, result = build_summary(args)
    except Exception:  # never leave the check without a summary
        text = ("# kvsim GPU check\n\n**Result: FAIL: the summarizer itself failed**\n\n```\n" +
                traceback.format_exc() + "```\n")
        verdict, result = "FAIL", "summarizer error"
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    # First line: PASS, NO_GPU or FAIL (gpu_check.sh's exit status 0, 2, 1); then the reason.
    print(verdict)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
