#!/usr/bin/env python3
"""Turns one inference-perf run (calibration/vllm-h100-runs/<run>/) into a kvsim JSONL trace.

It reproduces the load generator's `shared_prefix` workload as the run executed it
(tools/latency_validation/README.md gives the sources and the evidence):

- The workload is read from results/config.yaml, the config inference-perf parsed and dumped,
  not from profile.yaml: the version that ran knew `num_groups`/`num_prompts_per_group` only, so
  the profile's `num_unique_system_prompts`, `num_users_per_system_prompt` and
  `enable_multi_turn_chat` were ignored and the defaults (10 x 10, single turn) ran.
- num_groups x num_prompts_per_group prompts are made once: each is its group's system prompt,
  " ", and its own question; they are shuffled once and then cycled, request i of a stage
  sending prompt i mod len(prompts). After the first pass every prompt is a repeat.
- Prompt lengths: random token ids are decoded to text and the server re-tokenizes it, so the
  token counts differ from system_prompt_len + question_len; the measured `prompt_len`
  percentiles of the run (summary_lifecycle_metrics.json) are sampled instead, and the system
  prompt gets BOS + system_prompt_len scaled by the same inflation.
- Shared content is written as hash_ids of 16 tokens (vLLM's block size): a group's full
  system-prompt blocks share ids, every other block has the prompt's own ids.
- Arrivals ("constant" load): per stage, int(rate x duration) exponential gaps rescaled to sum to
  the duration, starting 1 s after the stage opens (ConstantLoadTimer, load_generator.run_stage).
  A stage opens after the previous one has drained; --stage-gap seconds of idle stand in for it.
- Outputs: ignore_eos with max_tokens = output_len, so every request generates output_len.

Each record carries "stage" (ignored by kvsim's reader) so results can be split per stage.
Deterministic for a given --seed (Python's Mersenne Twister, stable across versions).
"""

import argparse
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from located import Document, RunError  # noqa: E402

BLOCK = 16  # vLLM's default block size: hash ids cover whole allocator blocks.
PERCENTILE_KEYS = [(0.0, "min"), (0.001, "p0.1"), (0.01, "p1"), (0.05, "p5"), (0.10, "p10"),
                   (0.25, "p25"), (0.5, "median"), (0.75, "p75"), (0.90, "p90"),
                   (0.95, "p95"), (0.99, "p99"), (0.999, "p99.9"), (1.0, "max")]


def read_workload(run_dir):
    """The effective workload of one run: a dict with the fields the trace needs."""
    cfg = Document(os.path.join(run_dir, "results", "config.yaml"))
    if cfg.get("data", "type") != "shared_prefix":
        raise cfg.error(["data", "type"], "only shared_prefix is reproduced "
                                          f"(got {cfg.get('data', 'type')!r})")
    if cfg.get("data", "shared_prefix", "enable_multi_turn_chat", default=False):
        raise cfg.error(["data", "shared_prefix", "enable_multi_turn_chat"],
                        "multi-turn sessions are not reproduced")
    w = {k: cfg.number("data", "shared_prefix", k, integer=True)
         for k in ("num_groups", "num_prompts_per_group", "system_prompt_len",
                   "question_len", "output_len")}
    if w["output_len"] < 2:
        raise cfg.error(["data", "shared_prefix", "output_len"], "TPOT needs at least 2 tokens")
    if cfg.get("load", "type") != "constant":
        raise cfg.error(["load", "type"], f"only constant is reproduced "
                                          f"(got {cfg.get('load', 'type')!r})")
    stages = cfg.get("load", "stages")
    if not isinstance(stages, list) or not stages:
        raise cfg.error(["load", "stages"], "expected a non-empty list")
    w["stages"] = [(float(cfg.number("load", "stages", i, "rate")),
                    float(cfg.number("load", "stages", i, "duration")))
                   for i in range(len(stages))]
    if cfg.get("server", "ignore_eos") is not True:
        raise cfg.error(["server", "ignore_eos"], "output lengths are known only with "
                                                  "ignore_eos true")
    summary = Document(os.path.join(run_dir, "results", "summary_lifecycle_metrics.json"))
    points = [(q, summary.number("successes", "prompt_len", key)) for q, key in PERCENTILE_KEYS]
    if any(b[1] < a[1] for a, b in zip(points, points[1:])):
        raise summary.error(["successes", "prompt_len"], "percentiles decrease")
    w["prompt_len_points"] = points
    w["prompt_len_mean"] = summary.number("successes", "prompt_len", "mean")
    return w


def _sample_length(rng, points):
    u = rng.random()
    for (q0, v0), (q1, v1) in zip(points, points[1:]):
        if u <= q1:
            return round(v0 + (v1 - v0) * ((u - q0) / (q1 - q0) if q1 > q0 else 0.0))
    return round(points[-1][1])


def make_prompts(w, rng):
    """[(group, system_tokens, total_tokens)], one per prompt, in the shuffled send order."""
    inflation = (w["prompt_len_mean"] - 1) / (w["system_prompt_len"] + w["question_len"])
    system_tokens = 1 + round(w["system_prompt_len"] * inflation)  # BOS + system prompt
    prompts = []
    for g in range(w["num_groups"]):
        for _ in range(w["num_prompts_per_group"]):
            total = max(system_tokens + 1, _sample_length(rng, w["prompt_len_points"]))
            prompts.append((g, system_tokens, total))
    rng.shuffle(prompts)  # random.shuffle(self.prompts) in SharedPrefixDataGenerator
    return prompts


def hash_ids(prompt_index, group, system_tokens, total):
    shared = system_tokens // BLOCK  # full blocks inside the group's system prompt
    ids = []
    for j in range(math.ceil(total / BLOCK)):
        if j < shared:
            ids.append(group * 1000 + j)
        else:
            ids.append(1_000_000 + prompt_index * 10_000 + j)
    return ids


def make_records(w, seed, stage_gap_s):
    rng = random.Random(seed)
    prompts = make_prompts(w, rng)
    records, stage_open = [], 0.0
    for stage, (rate, duration) in enumerate(w["stages"]):
        n = int(rate * duration)
        gaps = [rng.expovariate(rate) for _ in range(n)]
        scale = duration / sum(gaps)
        t = stage_open + 1.0  # run_stage schedules from perf_counter() + 1
        for i, gap in enumerate(gaps):
            t += gap * scale
            p = i % len(prompts)  # get_data() restarts per stage and cycles the prompts
            group, system_tokens, total = prompts[p]
            records.append({"arrival_s": round(t, 9), "input_tokens": total,
                            "output_tokens": w["output_len"], "hash_block_size": BLOCK,
                            "hash_ids": hash_ids(p, group, system_tokens, total),
                            "stage": stage})
        stage_open = t + stage_gap_s
    return records


def write_trace(records, out):
    with open(out, "w", encoding="utf-8") as f:
        f.write(json.dumps({"kvsim_trace": 1, "records": len(records)}) + "\n")
        for r in records:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="calibration/vllm-h100-runs/<run>")
    ap.add_argument("-o", "--output", required=True, help="kvsim JSONL trace to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stage-gap", type=float, default=60.0,
                    help="idle seconds between stages, standing in for the drain (default 60)")
    a = ap.parse_args(argv)
    try:
        write_trace(make_records(read_workload(a.run_dir), a.seed, a.stage_gap), a.output)
    except RunError as e:
        print(f"make_trace: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
