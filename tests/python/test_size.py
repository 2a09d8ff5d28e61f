"""kvsim.size: the same report as `kvsim size --json/--csv` (every key but the command-line
fingerprint size_id, each candidate's replay_command included), the recommended candidate's
replay_command reproducing its numbers through the CLI, errors naming the option, Ctrl-C."""

import _thread
import io
import json
import shlex
import threading
import time

import numpy as np
import pytest

import kvsim
from conftest import AZURE_CONV, MOONCAKE, flags, in_cli_spelling, in_python_spelling

pd = pytest.importorskip("pandas")

# (trace, read_trace keywords, size keywords as Python takes them, the same as CLI flags).
CASES = {
    # Feasible at 1 to 5 replicas, and SLO-unreachable at max_replicas (rtx4090 TP 1).
    "azure-conv-mixed": (
        AZURE_CONV, dict(max_requests=300, time_scale=0.2),
        dict(model="qwen2.5-7b", slo_ttft_p99=1, slo_tpot_p99=0.05,
             gpus=["l40s", "h100-80g", "rtx4090"], tp=[1, 2], kv_cache_dtype=["auto", "fp8"],
             router="least-outstanding", max_replicas=8, jobs=2),
        ["--model", "qwen2.5-7b", "--slo-ttft-p99", 1, "--slo-tpot-p99", 0.05,
         "--gpus", "l40s,h100-80g,rtx4090", "--tp", "1,2", "--kv-cache-dtype", "auto,fp8",
         "--router", "least-outstanding", "--max-replicas", 8, "--jobs", 2]),
    # Does not fit (TP 1; TP 4 on the L40S at this context), invalid (TP 3), and many shared
    # flags that the replay commands must carry, in the CLI's order.
    "mooncake-70b-verdicts": (
        MOONCAKE, dict(max_requests=200),
        dict(model="llama-3.1-70b", max_model_len=131072, gpu_memory_utilization=0.92,
             slo_ttft_p99=2, slo_tpot_p99=0.1, slo_e2e_p99=60.5, gpus="l40s,h100-80g",
             tp=[1, 3, 4], block_sizes=[16, 32], max_num_seqs=64,
             enable_prefix_caching=False, async_scheduling=False, step_time="fixed:15",
             gpu_price={"h100-80g": 2.5}, router="prefix-affinity", router_seed=3,
             affinity_prefix_blocks=33, admission_max_waiting_requests=50, max_replicas=4,
             early_stop=False),
        ["--model", "llama-3.1-70b", "--max-model-len", 131072, "--gpu-memory-utilization",
         0.92, "--slo-ttft-p99", 2, "--slo-tpot-p99", 0.1, "--slo-e2e-p99", 60.5,
         "--gpus", "l40s,h100-80g", "--tp", "1,3,4", "--block-sizes", "16,32",
         "--max-num-seqs", 64, "--no-enable-prefix-caching", "--no-async-scheduling",
         "--step-time", "fixed:15", "--gpu-price", "h100-80g=2.5", "--router",
         "prefix-affinity", "--router-seed", 3, "--affinity-prefix-blocks", 33,
         "--admission-max-waiting-requests", 50, "--max-replicas", 4, "--no-early-stop"]),
}


@pytest.fixture(scope="module")
def cli_runs(cli, tmp_path_factory):
    """Each case through the CLI once: the JSON report, the CSV and the printed table."""
    out = {}
    for name, (path, read_kw, _, args) in CASES.items():
        d = tmp_path_factory.mktemp(name)
        p = cli.run("size", path, *flags(**read_kw), *args, "--json", d / "s.json", "--csv",
                    d / "s.csv")
        out[name] = (json.loads((d / "s.json").read_text()),
                     pd.read_csv(d / "s.csv", keep_default_na=False, na_values=[""]), p.stdout)
    return out


@pytest.fixture(scope="module")
def py_runs():
    return {name: kvsim.size(kvsim.read_trace(path, **read_kw), **kw)
            for name, (path, read_kw, kw, _) in CASES.items()}


@pytest.mark.parametrize("name", CASES)
def test_report_matches_cli_json(cli_runs, py_runs, name):
    expected, _, table = cli_runs[name]
    got = py_runs[name]
    assert isinstance(got, kvsim.SizeReport)
    assert "size_id" in expected and "size_id" not in got
    del expected["size_id"]
    # The reasons name parameters in each front end's spelling; everything else is the same.
    as_cli = got.to_dict()
    for c in as_cli["candidates"]:
        c["reason"] = in_cli_spelling(c["reason"])
    assert as_cli == expected  # replay_command strings included
    assert in_cli_spelling(str(got)) == table


@pytest.mark.parametrize("name", CASES)
def test_candidates_match_cli_csv(cli_runs, py_runs, name):
    csv = cli_runs[name][1]
    df = py_runs[name].candidates
    assert list(df.columns) == list(csv.columns)
    assert len(df) == len(csv) == py_runs[name].num_candidates
    for col in df.columns:
        a, b = df[col], csv[col]
        if a.dtype == np.float64:
            np.testing.assert_allclose(a.to_numpy(), b.to_numpy(dtype=np.float64), rtol=1e-12,
                                       err_msg=col)
        elif a.dtype == bool:
            assert a.tolist() == [v in (True, "true") for v in b], col
        elif col == "reason":  # parameters in each front end's spelling
            assert [in_cli_spelling(r) for r in a.astype(str)] == b.fillna("").astype(str).tolist()
        else:
            assert a.astype(str).tolist() == b.fillna("").astype(str).tolist(), col


def test_the_cases_cover_every_verdict(py_runs):
    verdicts = set()
    for r in py_runs.values():
        verdicts |= set(r.candidates["verdict"])
    assert verdicts == {"feasible", "slo_unreachable", "does_not_fit", "invalid"}
    mixed = py_runs["azure-conv-mixed"].candidates
    assert mixed["replicas"].max() > 1  # the search went past one replica


def test_recommended_and_trials(py_runs):
    r = py_runs["azure-conv-mixed"]
    best = r.recommended
    first = r.candidates.iloc[0]
    assert best.feasible and best.candidate_index == first["candidate_index"]
    assert best.cost_per_hour == r.candidates["cost_per_hour"].min()
    trials = r.trials
    assert len(trials) == r.candidates["trials"].sum()
    mine = trials[trials["candidate_index"] == best.candidate_index]
    assert mine["meets_slo"].any() and best.replicas in set(mine["replicas"])
    assert trials["meets_slo"].dtype == bool


def test_recommended_replay_command_reproduces_it(cli, py_runs):
    best = py_runs["azure-conv-mixed"].recommended
    argv = shlex.split(best.replay_command)
    assert argv[:2] == ["kvsim", "replay"]
    out = cli.json(*argv[1:], "--json", "-", "--no-progress")
    assert out["replicas"] == best.replicas and out["gpu"] == best.gpu
    assert out["slo"]["p99_verdict"] is True
    assert out["ttft_p99_s"] == pytest.approx(best.ttft_p99_s, rel=1e-12)
    assert out["tpot_p99_s"] == pytest.approx(best.tpot_p99_s, rel=1e-12)


def test_a_trace_built_from_columns_has_no_replay_command():
    t = kvsim.read_trace(AZURE_CONV, max_requests=100)
    df = t.to_pandas()
    mem = kvsim.Trace.from_pandas(df)
    r = kvsim.size(mem, model="qwen2.5-7b", slo_ttft_p99=2, slo_tpot_p99=0.1, gpus="h100-80g",
                   tp=1)
    assert r.recommended is not None and r.recommended.replay_command is None
    from_file = kvsim.size(t, model="qwen2.5-7b", slo_ttft_p99=2, slo_tpot_p99=0.1,
                           gpus="h100-80g", tp=1)
    assert from_file.recommended.replay_command == (
        f"kvsim replay {AZURE_CONV} --model qwen2.5-7b --max-requests 100 --slo-ttft-p99 2 "
        "--slo-tpot-p99 0.1 --gpu h100-80g --tensor-parallel-size 1 --kv-cache-dtype auto "
        "--replicas 1 --router round-robin")
    a, b = r.to_dict(), from_file.to_dict()
    for c in a["candidates"] + b["candidates"]:
        c.pop("replay_command")
    a.pop("trace"), b.pop("trace")
    assert a == b


def test_errors_carry_the_cli_message(cli):
    t = kvsim.read_trace(AZURE_CONV, max_requests=50)
    base = dict(model="qwen2.5-7b", slo_ttft_p99=2, slo_tpot_p99=0.1)
    base_flags = ["--model", "qwen2.5-7b", "--slo-ttft-p99", 2, "--slo-tpot-p99", 0.1]
    for kw, args, spelled in (
            (dict(gpus=["h100"], tp=[1]), ["--gpus", "h100", "--tp", 1], ("--gpus", "gpus=")),
            (dict(gpus=["l40s"], tp=[1, 1]), ["--gpus", "l40s", "--tp", "1,1"], ("--tp", "tp=")),
            (dict(gpus=["l40s"], tp=[1], gpu_price={"tpu": 5}),
             ["--gpus", "l40s", "--tp", 1, "--gpu-price", "tpu=5"],
             ("--gpu-price 'tpu=5'", "gpu_price='tpu=5'")),
            (dict(gpus=["l40s"], tp=[1], max_replicas=5000),
             ["--gpus", "l40s", "--tp", 1, "--max-replicas", 5000],
             ("--max-replicas 5000", "max_replicas=5000"))):
        message = cli.error("size", AZURE_CONV, "--max-requests", 50, *base_flags, *args)
        with pytest.raises(ValueError) as e:
            kvsim.size(t, **base, **kw)
        assert str(e.value) == in_python_spelling(message, spelled)
        assert "\n" not in message


@pytest.mark.parametrize("kw, match", [
    # The run room's rules (run/size_job.cpp, the CLI's too), in Python's spelling.
    (dict(slo_tpot_p99=None), r"^size: slo_tpot_p99= is required$"),
    (dict(model=None), r"^size: a model is required \(model=, config=, or "
                       r"num_layers=/num_kv_heads=/head_dim=\)$"),
    (dict(gpus=[]), r"^gpus=: at least one GPU is required$"),
    (dict(slo_ttft_p99=-1), r"^size\(\): slo_ttft_p99 must be > 0"),
    (dict(max_replicas=0), r"^size\(\): max_replicas must be > 0"),
    (dict(gpu_price={"l40s": 0}), r"^size\(\): gpu_price\['l40s'\] must be a finite number > 0"),
    (dict(router="nearest"), r"^size\(\): router must be one of"),
])
def test_keyword_errors_name_the_option(kw, match):
    args = dict(model="qwen2.5-7b", slo_ttft_p99=2, slo_tpot_p99=0.1, gpus=["l40s"], tp=[1])
    args.update(kw)
    with pytest.raises(ValueError, match=match) as e:
        kvsim.size(kvsim.read_trace(AZURE_CONV, max_requests=50), **args)
    assert "\n" not in str(e.value)


def test_type_errors():
    t = kvsim.read_trace(AZURE_CONV, max_requests=50)
    with pytest.raises(TypeError, match="tp must hold integers"):
        kvsim.size(t, model="qwen2.5-7b", slo_ttft_p99=2, slo_tpot_p99=0.1, gpus="l40s",
                   tp=["1"])
    with pytest.raises(TypeError, match="trace must be a kvsim.Trace or a path"):
        kvsim.size(None, model="qwen2.5-7b", slo_ttft_p99=2, slo_tpot_p99=0.1, gpus="l40s",
                   tp=1)


def test_ctrl_c_interrupts_a_search():
    trace = kvsim.read_trace(AZURE_CONV)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        # Full-trace replays on many candidates: about a minute of CPU if not interrupted.
        kvsim.size(trace, model="qwen2.5-7b", slo_ttft_p99=2, slo_tpot_p99=0.1,
                   gpus=["l4", "l40s", "a100-80g", "h100-80g"], tp=[1, 2],
                   kv_cache_dtype=["auto", "fp8"], max_num_seqs=[64, 128, 256])
    timer.join()
    assert time.monotonic() - start < 30


def test_size_is_in_the_type_stubs():
    import pathlib

    from kvsim import _kvsim

    stub = (pathlib.Path(_kvsim.__file__).parent / "_kvsim.pyi").read_text()
    assert "def size(" in stub and "cluster_options" in stub
    import inspect

    hints = inspect.signature(kvsim.size).parameters
    assert hints["slo_ttft_p99"].kind is inspect.Parameter.KEYWORD_ONLY
    assert inspect.signature(kvsim.replay).parameters["replicas"].default is None


def test_results_do_not_depend_on_jobs(py_runs):
    path, read_kw, kw, _ = CASES["azure-conv-mixed"]
    one = kvsim.size(kvsim.read_trace(path, **read_kw), **dict(kw, jobs=1))
    assert one.to_dict() == py_runs["azure-conv-mixed"].to_dict()


def test_without_pandas_tables_are_numpy(monkeypatch, py_runs):
    from kvsim import _frames
    monkeypatch.setattr(_frames, "_pd", None)
    r = py_runs["azure-conv-mixed"]
    c = r.candidates
    assert isinstance(c, dict) and c["rank"].tolist() == list(range(1, r.num_candidates + 1))
    assert c["feasible"].dtype == bool and c["ttft_p99_s"].dtype == np.float64
    assert isinstance(r.trials, dict) and len(r.trials["replicas"]) == c["trials"].sum()


def test_no_feasible_candidate_warns_like_the_cli_exit_status(cli):
    args = ["--model", "qwen2.5-7b", "--slo-ttft-p99", 0.001, "--slo-tpot-p99", 0.001,
            "--gpus", "rtx4090", "--tp", 1, "--max-replicas", 2]
    p = cli.run("size", AZURE_CONV, "--max-requests", 50, *args, check=False)
    assert p.returncode == 3
    with pytest.warns(RuntimeWarning, match="no candidate meets the SLO"):
        r = kvsim.size(kvsim.read_trace(AZURE_CONV, max_requests=50), model="qwen2.5-7b",
                       slo_ttft_p99=0.001, slo_tpot_p99=0.001, gpus="rtx4090", tp=1,
                       max_replicas=2)
    assert r.feasible == 0 and r.recommended is None
    assert r.candidates["verdict"].tolist() == ["slo_unreachable"]


def test_reasons_name_parameters_as_keywords(py_runs):
    reasons = [r for report in py_runs.values() for r in report.candidates["reason"] if r]
    assert any("max_replicas=" in r for r in reasons), reasons
    assert not any("--" in r for r in reasons), reasons
