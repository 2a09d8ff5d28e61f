#!/usr/bin/env python3
"""Where the goldens of two vLLM releases differ, case by case (no vLLM needed).

    python3 tools/vllm_conformance/compare_releases.py [--a 0.26] [--b 0.33] [CASE ...]

Scheduler goldens (tests/data/vllm_goldens/<release>/): for each case in both folders, the first
step whose record differs and, over the common steps, how many differ in the scheduled requests
("s": ids, tokens, hits, block ids), preemptions ("p"), free blocks and the prefix-cache counters
("pc"); then the step counts and the final per-request results. Planner goldens
(tests/data/vllm_plan_goldens/<release>/): the top-level fields that differ.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "tests" / "data"


def sched_diff(a: dict, b: dict) -> str:
    sa, sb = a["steps"], b["steps"]
    n = min(len(sa), len(sb))
    first = next((i for i in range(n) if sa[i] != sb[i]), None)
    if first is None and len(sa) == len(sb):
        first_txt = "steps identical"
    else:
        first_txt = f"first differing step {first if first is not None else n}"
    counts = {}
    for key in ("s", "p", "free", "pc"):
        counts[key] = sum(1 for i in range(n) if sa[i][key] != sb[i][key])
    blocks_only = sum(
        1 for i in range(n)
        if sa[i]["s"] != sb[i]["s"]
        and [x[:3] + x[4:] for x in sa[i]["s"]] == [x[:3] + x[4:] for x in sb[i]["s"]])
    pre = (sum(len(s["p"]) for s in sa), sum(len(s["p"]) for s in sb))
    pc = (sa[-1]["pc"], sb[-1]["pc"])
    parts = [first_txt, f"steps {len(sa)}/{len(sb)}", f"preemptions {pre[0]}/{pre[1]}"]
    parts += [f"{k} differs in {v}" for k, v in counts.items() if v]
    if blocks_only:
        parts.append(f"{blocks_only} of them only in block ids")
    if pc[0] != pc[1]:
        parts.append(f"final pc {pc[0]} / {pc[1]}")
    if a["final"] != b["final"]:
        parts.append("final per-request results differ")
    extra = sorted((set(a) ^ set(b)) - {"steps"})
    if extra:
        parts.append(f"keys only in one: {extra}")
    return "; ".join(parts)


def plan_diff(a: dict, b: dict) -> str:
    keys = sorted(k for k in set(a) | set(b) if k != "vllm_version" and a.get(k) != b.get(k))
    out = ", ".join(keys) if keys else "identical"
    if "error" in b and "error" not in a:
        out += f" | {b['vllm_version']} refuses: {b['error']['message'][:90]}..."
    for k in ("num_blocks", "max_concurrency", "max_in_flight_tokens", "max_num_batched_tokens"):
        if k in keys and k in a and k in b:
            out += f" | {k} {a[k]} -> {b[k]}"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", default="0.26")
    ap.add_argument("--b", default="0.33")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    da, db = ROOT / "vllm_goldens" / args.a, ROOT / "vllm_goldens" / args.b
    for fa in sorted(da.glob("*.json.gz")):
        name = fa.name[: -len(".json.gz")]
        fb = db / fa.name
        if args.cases and name not in args.cases:
            continue
        if not fb.exists():
            print(f"{name}: only in {args.a}")
            continue
        a = json.loads(gzip.decompress(fa.read_bytes()))
        b = json.loads(gzip.decompress(fb.read_bytes()))
        print(f"{name}: {sched_diff(a, b)}")
    for fb in sorted(db.glob("*.json.gz")):
        if not (da / fb.name).exists() and (not args.cases or fb.name[:-8] in args.cases):
            print(f"{fb.name[:-8]}: only in {args.b}")
    pa, pb = ROOT / "vllm_plan_goldens" / args.a, ROOT / "vllm_plan_goldens" / args.b
    for fa in sorted(pa.glob("*.json")):
        if args.cases and fa.stem not in args.cases:
            continue
        fb = pb / fa.name
        if not fb.exists():
            print(f"plan {fa.stem}: only in {args.a}")
            continue
        print(f"plan {fa.stem}: {plan_diff(json.loads(fa.read_text()), json.loads(fb.read_text()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
