"""kvsim.replay's cluster mode: the same numbers as `kvsim replay --replicas N --router R --json`,
its report and its cluster CSVs (replica column, admission refusals), the per-replica
summaries, errors with the CLI's one-line messages, and Ctrl-C."""

import _thread
import json
import threading
import time

import numpy as np
import pytest

import kvsim
from conftest import (AZURE_CODE, AZURE_CONV, BURSTGPT, LESSON, MOONCAKE, flags,
                      in_python_spelling, without_wall)
from test_replay import assert_same_table

pd = pytest.importorskip("pandas")

# (trace, read_trace keywords, replay keywords): each router family, staleness, admission
# control, SLO accounting with an early stop, and --replicas 1.
CASES = {
    "azure-conv-round-robin-4": (AZURE_CONV, dict(max_requests=400),
                                 dict(LESSON, replicas=4, router="round-robin")),
    "mooncake-kv-aware-stale": (MOONCAKE, dict(max_requests=300),
                                dict(model="llama-3.1-8b", gpu="h100-80g", replicas=3,
                                     router="kv-aware", router_staleness_ms=50)),
    "azure-code-admission-slo": (AZURE_CODE, dict(max_requests=300, time_scale=0.2),
                                 dict(model="qwen2.5-7b", num_gpu_blocks_override=800,
                                      max_model_len=8192, replicas=2,
                                      router="least-outstanding",
                                      admission_max_waiting_requests=2, slo_ttft_p99=2,
                                      slo_tpot_p99=0.1)),
    "azure-conv-slo-stop-early": (AZURE_CONV, dict(max_requests=400, time_scale=0.05),
                                  dict(model="qwen2.5-7b", replicas=2, router="power-of-two",
                                       router_seed=7, slo_ttft_p99=0.05, slo_stop_early=True)),
    "burstgpt-one-replica": (BURSTGPT, {}, dict(model="qwen2.5-7b", replicas=1)),
}


@pytest.fixture(scope="module")
def cli_runs(cli, tmp_path_factory):
    """Each case through the CLI once: JSON summary, report, timeline and requests CSVs."""
    out = {}
    for name, (path, read_kw, kw) in CASES.items():
        d = tmp_path_factory.mktemp(name)
        args = ["replay", path, *flags(**read_kw), *flags(**kw), "--no-progress"]
        cli.run(*args, "--json", d / "s.json", "--timeline", d / "t.csv", "--requests", d / "r.csv")
        report = cli.run(*args).stdout
        out[name] = (json.loads((d / "s.json").read_text()), report,
                     pd.read_csv(d / "t.csv", keep_default_na=False, na_values=[""]),
                     pd.read_csv(d / "r.csv", keep_default_na=False, na_values=[""]))
    return out


@pytest.fixture(scope="module")
def py_runs():
    out = {}
    for name, (path, read_kw, kw) in CASES.items():
        out[name] = kvsim.replay(kvsim.read_trace(path, **read_kw), **kw, timeline=True,
                                 requests=True)
    return out


@pytest.mark.parametrize("name", CASES)
def test_summary_matches_cli_json(cli_runs, py_runs, name):
    expected, report, _, _ = cli_runs[name]
    got = py_runs[name]
    assert isinstance(got, kvsim.ClusterReplayResult)
    assert without_wall(got.to_dict()) == without_wall(expected)
    assert list(got) == list(expected)
    assert str(got) == report


@pytest.mark.parametrize("name", CASES)
def test_tables_match_cli_csvs(cli_runs, py_runs, name):
    _, _, timeline, requests = cli_runs[name]
    assert_same_table(py_runs[name].timeline, timeline)
    assert_same_table(py_runs[name].requests, requests)


def test_the_cases_cover_what_they_name(py_runs):
    assert py_runs["azure-code-admission-slo"].admission_rejected > 0
    assert py_runs["azure-code-admission-slo"].slo.p99_verdict in (True, False)
    stopped = py_runs["azure-conv-slo-stop-early"]
    assert stopped.stopped_early and not stopped.slo.p99_verdict
    assert (stopped.requests["replica"] == -2).any()  # never routed after the stop
    assert "replica" not in py_runs["burstgpt-one-replica"].requests.columns


def test_per_replica_summaries(py_runs):
    r = py_runs["azure-conv-round-robin-4"]
    assert r.replicas == 4 and r.router == "round-robin"
    reps = r.per_replica
    assert [p.replica for p in reps] == [0, 1, 2, 3]
    assert sum(p["requests"] for p in reps) == r["requests"]
    assert max(p.peak_running for p in reps) == r.peak_running
    counts = r.requests["replica"].value_counts().sort_index()
    assert counts.tolist() == [p["requests"] for p in reps]
    frame = r.replica_frame
    assert frame["replica"].tolist() == [0, 1, 2, 3]
    assert frame["peak_running"].tolist() == [p.peak_running for p in reps]
    assert frame["requests"].dtype == np.int64
    assert frame["ttft.p99_s"].tolist() == [p.ttft.p99_s for p in reps]  # nested, flattened
    # Each replica's own rows of the timeline are that replica's steps.
    steps = r.timeline.groupby("replica").size()
    assert steps.tolist() == [p.steps for p in reps]


def test_admission_refusals_are_named(py_runs):
    r = py_runs["azure-code-admission-slo"]
    q = r.requests
    refused = q[q["replica"] == -1]
    assert len(refused) == r.admission_rejected
    assert set(refused["reject_reason"]) == {"admission_queue_full"}
    assert (refused["status"] == "rejected").all()


def test_one_replica_is_the_plain_replay(py_runs):
    cluster = py_runs["burstgpt-one-replica"]
    plain = kvsim.replay(kvsim.read_trace(BURSTGPT), model="qwen2.5-7b", timeline=True,
                         requests=True)
    assert type(plain) is kvsim.ReplayResult
    for key in plain:
        if key != "wall_seconds":
            assert cluster[key] == plain[key], key
    pd.testing.assert_frame_equal(cluster.requests, plain.requests)
    pd.testing.assert_frame_equal(cluster.timeline, plain.timeline)


def test_errors_carry_the_cli_message(cli):
    t = kvsim.read_trace(BURSTGPT)
    for kw, spelled in ((dict(replicas=2000), ("--replicas 2000", "replicas=2000")),
                        (dict(affinity_load_factor=0.5),
                         ("--affinity-load-factor 0.5", "affinity_load_factor=0.5")),
                        (dict(router_staleness_ms=1e30),
                         ("--router-staleness-ms 1e+30", "router_staleness_ms=1e+30"))):
        message = cli.error("replay", BURSTGPT, "--model", "qwen2.5-7b", *flags(**kw),
                            "--no-progress")
        with pytest.raises(ValueError) as e:
            kvsim.replay(t, model="qwen2.5-7b", **kw)
        assert str(e.value) == in_python_spelling(message, spelled)


@pytest.mark.parametrize("kw, match", [
    (dict(replicas=0), r"^replay\(\): replicas must be > 0 \(got 0\)$"),
    (dict(router="fastest"), r"^replay\(\): router must be one of round-robin, .*"),
    (dict(router_staleness_ms=-1), r"^replay\(\): router_staleness_ms must be >= 0"),
    (dict(admission_max_waiting_tokens=-5), r"^replay\(\): admission_max_waiting_tokens must"),
    (dict(slo_ttft_p99=0), r"^replay\(\): slo_ttft_p99 must be > 0"),
    (dict(slo_stop_early=True), r"^slo_stop_early= needs an objective \(slo_ttft_p99="),
    (dict(replicas=2, backend="host"),
     r"^backend=host: a cluster replay \(replicas=2\) runs the null backend only"),
])
def test_keyword_errors_name_the_option(kw, match):
    with pytest.raises(ValueError, match=match) as e:
        kvsim.replay(kvsim.read_trace(BURSTGPT), model="qwen2.5-7b", **kw)
    assert "\n" not in str(e.value)


def test_type_errors():
    t = kvsim.read_trace(BURSTGPT)
    with pytest.raises(TypeError, match="replicas must be an integer"):
        kvsim.replay(t, replicas=2.0)
    with pytest.raises(TypeError, match="slo_stop_early must be True or False"):
        kvsim.replay(t, slo_ttft_p99=1, slo_stop_early=1)


def test_ctrl_c_interrupts_a_cluster_replay():
    trace = kvsim.read_trace(AZURE_CONV)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        # check_invariants makes this replay take minutes.
        kvsim.replay(trace, model="qwen2.5-7b", replicas=2, check_invariants=True)
    timer.join()
    assert time.monotonic() - start < 30


def test_without_pandas_tables_are_numpy(monkeypatch):
    from kvsim import _frames
    monkeypatch.setattr(_frames, "_pd", None)
    r = kvsim.replay(kvsim.read_trace(BURSTGPT), model="qwen2.5-7b", replicas=3,
                     timeline=True, requests=True)
    assert isinstance(r.replica_frame, dict) and r.replica_frame["replica"].tolist() == [0, 1, 2]
    assert r.requests["replica"].dtype == np.int32
    assert np.bincount(r.requests["replica"]).tolist() == [p["requests"] for p in r.per_replica]
    assert set(np.unique(r.timeline["replica"])) == {0, 1, 2}
