#!/usr/bin/env python3
"""The Prometheus round trip of `kvsim replay --metrics` (docs/metrics.md), with the real thing.

Replays a trace (plainly and on a 2-replica cluster) writing --metrics, --timeline, --requests,
--json and --vllm-log; imports each metrics file with `promtool tsdb create-blocks-from
openmetrics`; starts a `prometheus` server on the created TSDB (localhost, a free port, no
scrape targets); asks it over HTTP (/api/v1/query_range, /api/v1/query) for
vllm:num_requests_running, vllm:num_requests_waiting and vllm:kv_cache_usage_perc at every
scrape instant and compares them with the timeline CSV sampled at the same instants by the rule
of sim/include/kvsim/sim/report/openmetrics.h (the step in progress at T, else 0); checks the
last scrape's counters against the JSON summary and the request CSV, that the file ends with
"# EOF", and the vLLM log lines' format. Stops the server.

Exit 0: passed; 1: a mismatch; 77: promtool or prometheus not installed (ctest: skipped).
"""
import argparse
import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

INTERVAL_S = 15
START_S = 1735689600  # kvsim's default --metrics-start (run/include/kvsim/run/replay_job.h)
CLUSTER_START_S = START_S + 30 * 86400  # the cluster run's series, a month later
# A busy run: queues, preemptions and a full pool, so the series are not all 0 and 1.
LOAD = ["--time-scale", "0.02", "--num-gpu-blocks-override", "400"]


def ns(text):
    """Exact decimal seconds ("12.000000001") -> integer ns."""
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9])


def expected_gauges(rows, instants_ns):
    """The step in progress at T (latest row started at or before T, T before its end), else 0."""
    out, i = [], 0
    for t in instants_ns:
        while i < len(rows) and ns(rows[i]["time_s"]) <= t:
            i += 1
        r = rows[i - 1] if i > 0 else None
        if r is None or t >= ns(r["time_s"]) + ns(r["duration_s"]):
            out.append((0, 0, 0.0))
            continue
        used, free = int(r["used_blocks"]), int(r["free_blocks"])
        out.append((int(r["running"]), int(r["waiting"]),
                    used / (used + free) if used + free else 0.0))
    return out


class Prometheus:
    def __init__(self, binary, db, workdir):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
        self.log = open(os.path.join(workdir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={db}",
             f"--web.listen-address=127.0.0.1:{self.port}",
             "--storage.tsdb.retention.time=100y"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                sys.exit(f"prometheus did not become ready; its log: {self.log.name}")
            time.sleep(0.2)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=20) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"{url}: {body}")
        return body["data"]["result"]

    def range_values(self, query, start_s, end_s):
        result = self.api("query_range", query=query, start=start_s, end=end_s,
                          step=INTERVAL_S)
        if len(result) != 1:
            raise RuntimeError(f"{query}: {len(result)} series (expected 1)")
        return {round(float(t)): float(v) for t, v in result[0]["values"]}

    def value(self, query, at_s):
        result = self.api("query", query=query, time=at_s)
        if len(result) != 1:
            raise RuntimeError(f"{query} at {at_s}: {len(result)} series (expected 1)")
        return float(result[0]["value"][1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_replay(kvsim, trace, workdir, name, start_s, extra):
    paths = {k: os.path.join(workdir, f"{name}.{k}") for k in
             ("om", "timeline", "requests", "json", "log")}
    subprocess.run([kvsim, "replay", trace, "--no-progress", "--metrics", paths["om"],
                    "--metrics-start", str(start_s), "--timeline", paths["timeline"],
                    "--requests", paths["requests"], "--json", paths["json"],
                    "--vllm-log", paths["log"], *LOAD, *extra],
                   check=True, stdout=subprocess.DEVNULL)
    return paths


def check_run(prom, paths, start_s, engines, failures, label):
    with open(paths["om"], "rb") as f:
        f.seek(-6, os.SEEK_END)
        if f.read() != b"# EOF\n":
            failures.append(f"{label}: the metrics file does not end with '# EOF'")
    timeline = list(csv.DictReader(open(paths["timeline"])))
    requests = list(csv.DictReader(open(paths["requests"])))
    summary = json.load(open(paths["json"]))
    # The run's end: the last step end, first token or finish (openmetrics.h).
    end_ns = max([ns(r["time_s"]) + ns(r["duration_s"]) for r in timeline] +
                 [ns(q[k]) for q in requests for k in ("first_token_s", "finish_s") if q[k]])
    scrapes = -(-end_ns // (INTERVAL_S * 10**9)) + 1
    instants = [k * INTERVAL_S * 10**9 for k in range(scrapes)]
    end_s = start_s + (scrapes - 1) * INTERVAL_S
    compared = 0
    for e in range(engines):
        rows = [r for r in timeline if engines == 1 or int(r["replica"]) == e]
        want = expected_gauges(rows, instants)
        sel = f'{{engine="{e}"}}'
        got = [prom.range_values(f"vllm:{m}{sel}", start_s, end_s) for m in
               ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc")]
        for k, (running, waiting, usage) in enumerate(want):
            at = start_s + k * INTERVAL_S
            vals = [g.get(at) for g in got]
            if vals[0] != running or vals[1] != waiting or vals[2] is None or \
                    abs(vals[2] - usage) > 1e-12:
                failures.append(f"{label} engine {e} at +{k * INTERVAL_S} s: prometheus "
                                f"{vals}, timeline {(running, waiting, usage)}")
                break
            compared += 1
    # Counters at the last scrape, summed over engines.
    total = lambda q: sum(prom.value(f'{q}{{engine="{e}"}}', end_s) for e in range(engines))
    gen = sum(int(q["output_tokens"]) for q in requests if q["first_token_s"])
    finished = sum(1 for q in requests if q["status"] == "finished")
    checks = [
        ("vllm:generation_tokens_total", total("vllm:generation_tokens_total"), gen),
        ("vllm:generation_tokens_total (summary)", total("vllm:generation_tokens_total"),
         summary["generated_tokens"]),
        ('vllm:request_success_total{finished_reason="length"}',
         sum(prom.value(f'vllm:request_success_total{{engine="{e}",finished_reason="length"}}',
                        end_s) for e in range(engines)), finished),
        ("vllm:e2e_request_latency_seconds_count",
         total("vllm:e2e_request_latency_seconds_count"), finished),
        ("vllm:num_preemptions_total", total("vllm:num_preemptions_total"),
         summary["preemptions"]),
        ("vllm:iteration_tokens_total_sum", total("vllm:iteration_tokens_total_sum"),
         summary["scheduled_tokens"] if "scheduled_tokens" in summary else
         sum(int(r["scheduled_tokens"]) for r in timeline)),
    ]
    for name, got, want in checks:
        if abs(got - want) > 1e-6 * max(1, abs(want)):
            failures.append(f"{label}: {name} at the last scrape is {got}, expected {want}")
    line = re.compile(r"^INFO \d\d-\d\d \d\d:\d\d:\d\d \[loggers\.py:310\] Engine \d{3}: "
                      r"Avg prompt throughput: \d+\.\d tokens/s, Avg generation throughput: "
                      r"\d+\.\d tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, "
                      r"(Preemptions: \d+, )?GPU KV cache usage: \d+\.\d%, "
                      r"Prefix cache hit rate: \d+\.\d%$")
    lines = open(paths["log"]).read().splitlines()
    if not lines or any(not line.match(x) for x in lines):
        bad = next((x for x in lines if not line.match(x)), "(no line)")
        failures.append(f"{label}: vLLM log line not in vLLM's format: {bad}")
    return compared, scrapes, os.path.getsize(paths["om"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvsim", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    promtool, prometheus = shutil.which("promtool"), shutil.which("prometheus")
    if not promtool or not prometheus:
        print("SKIPPED: promtool/prometheus not installed (Debian: apt-get install prometheus; "
              "tools/install-deps.sh installs it)")
        return 77
    began = time.time()
    workdir = tempfile.mkdtemp(prefix="kvsim-prom-")
    db = os.path.join(workdir, "tsdb")
    failures = []
    prom = None
    try:
        plain = run_replay(args.kvsim, args.trace, workdir, "plain", START_S, [])
        cluster = run_replay(args.kvsim, args.trace, workdir, "cluster", CLUSTER_START_S,
                             ["--replicas", "2", "--router", "round-robin"])
        for paths in (plain, cluster):
            subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", paths["om"],
                            db], check=True, stdout=subprocess.DEVNULL)
        prom = Prometheus(prometheus, db, workdir)
        n1, s1, b1 = check_run(prom, plain, START_S, 1, failures, "replay")
        n2, s2, b2 = check_run(prom, cluster, CLUSTER_START_S, 2, failures, "replay --replicas 2")
    finally:
        if prom:
            prom.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"ok: prometheus returned the timeline's running/waiting/KV usage at {n1} + {n2} "
          f"instants ({s1} and {s2} scrapes; metrics files {b1} and {b2} bytes); counters "
          f"match the summary; {time.time() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
