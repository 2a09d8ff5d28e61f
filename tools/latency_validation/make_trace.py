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
import mini_yaml  # noqa: E402

BLOCK = 16  # vLLM's default block size: hash ids cover whole allocator blocks.
PERCENTILE_KEYS = [(0.0, "min"), (0.001, "p0.1"), (0.01, "p1"), (0.05, "p5"), (0.10, "p10"),
                   (0.25, "p25"), (0.5, "median"), (0.75, "p75"), (0.90, "p90"),
                   (0.95, "p95"), (0.99, "p99"), (0.999, "p99.9"), (1.0, "max")]


class RunError(ValueError):
    """Bad or unsupported run input; the message names the file and field."""


def _field(d, path, keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            raise RunError(f"{path}:1: field '{'.'.join(keys)}': missing")
        d = d[k]
    return d


def _positive(value, path, name, kind=(int, float)):
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        raise RunError(f"{path}:1: field '{name}': expected a positive number (got {value!r})")
    return value


def read_workload(run_dir):
    """The effective workload of one run: a dict with the fields the trace needs."""
    cfg_path = os.path.join(run_dir, "results", "config.yaml")
    try:
        cfg = mini_yaml.load(cfg_path)
    except OSError as e:
        raise RunError(f"{cfg_path}:1: field 'file': {e.strerror}") from None
    data = _field(cfg, cfg_path, ["data"])
    if data.get("type") != "shared_prefix":
        raise RunError(f"{cfg_path}:1: field 'data.type': only shared_prefix is reproduced "
                       f"(got {data.get('type')!r})")
    sp = _field(cfg, cfg_path, ["data", "shared_prefix"])
    if sp.get("enable_multi_turn_chat"):
        raise RunError(f"{cfg_path}:1: field 'data.shared_prefix.enable_multi_turn_chat': "
                       "multi-turn sessions are not reproduced")
    w = {k: _positive(sp.get(k), cfg_path, f"data.shared_prefix.{k}", int)
         for k in ("num_groups", "num_prompts_per_group", "system_prompt_len",
                   "question_len", "output_len")}
    load = _field(cfg, cfg_path, ["load"])
    if load.get("type") != "constant":
        raise RunError(f"{cfg_path}:1: field 'load.type': only constant is reproduced "
                       f"(got {load.get('type')!r})")
    stages = load.get("stages")
    if not isinstance(stages, list) or not stages:
        raise RunError(f"{cfg_path}:1: field 'load.stages': expected a non-empty list")
    w["stages"] = [(float(_positive(s.get("rate") if isinstance(s, dict) else None, cfg_path,
                                    f"load.stages[{i}].rate")),
                    float(_positive(s.get("duration") if isinstance(s, dict) else None,
                                    cfg_path, f"load.stages[{i}].duration")))
                   for i, s in enumerate(stages)]
    if _field(cfg, cfg_path, ["server", "ignore_eos"]) is not True:
        raise RunError(f"{cfg_path}:1: field 'server.ignore_eos': output lengths are known only "
                       "with ignore_eos true")
    summary_path = os.path.join(run_dir, "results", "summary_lifecycle_metrics.json")
    try:
        with open(summary_path, encoding="utf-8") as f:
            summary = json.load(f)
    except OSError as e:
        raise RunError(f"{summary_path}:1: field 'file': {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise RunError(f"{summary_path}:{e.lineno}: field 'document': {e.msg}") from None
    pl = _field(summary, summary_path, ["successes", "prompt_len"])
    points = []
    for q, key in PERCENTILE_KEYS:
        v = pl.get(key) if isinstance(pl, dict) else None
        points.append((q, _positive(v, summary_path, f"successes.prompt_len.{key}")))
    if any(b[1] < a[1] for a, b in zip(points, points[1:])):
        raise RunError(f"{summary_path}:1: field 'successes.prompt_len': percentiles decrease")
    w["prompt_len_points"] = points
    w["prompt_len_mean"] = _positive(pl.get("mean"), summary_path, "successes.prompt_len.mean")
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
