"""The measured side: one run's exp-config.yaml and inference-perf's per-stage lifecycle metrics.

inference-perf's TTFT is output_token_times[0] - start and its request latency end - start,
both client-side. Its time_per_output_token is (t[-1] - t[0]) / (len(t) - 1) over the
timeline output_token_times; the version that measured these runs stamped every line of the
SSE stream (each token's "data:" line and the blank line after it, then "data: [DONE]" and its
blank line), so a request with N output tokens has 2N + 2 stamps and the reported TPOT is the
decode time divided by 2N + 1, not N - 1. The data confirm it: (mean E2E - mean TTFT) / mean
TPOT is 2N + 1 within 0.5 on every stage, and inter_token_latency's median is tens of
microseconds (the blank-line gaps). Every request has the same N (ignore_eos), so the decode
time per output token, (E2E - TTFT) / (N - 1), is the reported TPOT times (2N + 1) / (N - 1),
for the mean and every percentile alike; that is the TPOT compared here.
"""

import glob
import os
import re

from located import Document, RunError

CLIENT_TIMEOUT_S = 300.0  # every failed request's latency is 300.0-301 s: aiohttp's 5-min total


def read_server(run_dir):
    cfg = Document(os.path.join(run_dir, "exp-config.yaml"))
    out = {"model": cfg.get("model")}
    if not isinstance(out["model"], str) or not out["model"]:
        raise cfg.error(["model"], f"expected a model name (got {out['model']!r})")
    for key in ("tensor_parallelism", "max_model_len", "max_num_batched_tokens",
                "max_num_seqs"):
        out[key] = cfg.number(key, integer=True)
    return out


def read_stages(run_dir, output_len):
    """{stage: {"ttft"|"tpot"|"e2e": {mean,p50,p90}, "count", "failures", ...}} in seconds."""
    stages = {}
    paths = glob.glob(os.path.join(run_dir, "results", "stage_*_lifecycle_metrics.json"))
    if not paths:
        raise RunError(f"{os.path.join(run_dir, 'results')}:1: field 'stage_N_lifecycle_metrics"
                       ".json': no stage metrics")
    scale = (2 * output_len + 1) / (output_len - 1)
    for path in paths:
        stage = int(re.search(r"stage_(\d+)_", os.path.basename(path)).group(1))
        m = Document(path)
        lat = ("successes", "latency")
        s = {"count": m.number("successes", "count", integer=True),
             "failures": m.number("failures", "count", integer=True, positive=False),
             "ttft": {}, "tpot": {}, "e2e": {}, "tpot_reported": {}}
        for ours, theirs in (("mean", "mean"), ("p50", "median"), ("p90", "p90")):
            s["ttft"][ours] = m.number(*lat, "time_to_first_token", theirs)
            s["e2e"][ours] = m.number(*lat, "request_latency", theirs)
            reported = m.number(*lat, "time_per_output_token", theirs)
            s["tpot_reported"][ours] = reported
            s["tpot"][ours] = reported * scale
        stages[stage] = s
    return stages
