"""kvsim.replay: the same numbers as `kvsim replay --json`, the timeline and per-request tables
as DataFrames equal to the CLI's CSVs, errors, the GIL and Ctrl-C."""

import _thread
import threading
import time
import warnings

import numpy as np
import pytest

import kvsim
from kvsim import _kvsim, _results
from conftest import (AZURE_CODE, AZURE_CONV, BURSTGPT, LESSON, MOONCAKE, SHAREGPT, VIDUR, flags,
                      in_python_spelling, without_wall)

pd = pytest.importorskip("pandas")

# (trace, read_trace keywords, replay keywords): every scheduler path the CLI has.
CASES = {
    "azure-conv-lesson": (AZURE_CONV, dict(max_requests=800), LESSON),
    "azure-code-default-model": (AZURE_CODE, dict(max_requests=400), {}),
    "mooncake-prefix-h100": (MOONCAKE, dict(max_requests=300),
                             dict(model="llama-3.1-8b", gpu="h100-80g", max_num_seqs=64)),
    "burstgpt-sync-no-caching": (BURSTGPT, {}, dict(model="qwen2.5-7b", async_scheduling=False,
                                                    enable_prefix_caching=False,
                                                    enable_chunked_prefill=False)),
    "vidur-swap-preemption": (VIDUR, dict(max_requests=300),
                              dict(model="qwen2.5-7b", num_gpu_blocks_override=400,
                                   max_model_len=4096, preemption_mode="swap")),
    "sharegpt-recompute-preemption": (SHAREGPT, dict(max_requests=300, time_scale=0.5),
                                      dict(model="mistral-7b", num_gpu_blocks_override=300,
                                           max_model_len=4096, step_time="fixed:20",
                                           long_prefill_token_threshold=256)),
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
        import json
        out[name] = (json.loads((d / "s.json").read_text()), report,
                     pd.read_csv(d / "t.csv", keep_default_na=False, na_values=[""]),
                     pd.read_csv(d / "r.csv", keep_default_na=False, na_values=[""]))
    return out


@pytest.fixture(scope="module")
def py_runs():
    out = {}
    for name, (path, read_kw, kw) in CASES.items():
        trace = kvsim.read_trace(path, **read_kw)
        out[name] = kvsim.replay(trace, **kw, timeline=True, requests=True)
    return out


@pytest.mark.parametrize("name", CASES)
def test_summary_matches_cli_json(cli_runs, py_runs, name):
    expected, report, _, _ = cli_runs[name]
    got = py_runs[name]
    assert without_wall(got.to_dict()) == without_wall(expected)
    assert list(got) == list(expected)
    assert got.peak_running == expected["peak_running"]
    assert got.wall_seconds > 0
    assert str(got) == report


def assert_same_table(df, csv):
    assert list(df.columns) == list(csv.columns)
    assert len(df) == len(csv)
    for col in df.columns:
        a, b = df[col], csv[col]
        if isinstance(a.dtype, pd.CategoricalDtype) or a.dtype == object:
            assert a.astype(object).where(a.notna(), "").tolist() == \
                b.astype(object).where(b.notna(), "").tolist(), col
        elif col.endswith("_s"):
            np.testing.assert_allclose(a.to_numpy(), b.to_numpy(dtype=np.float64), rtol=0,
                                       atol=1e-9, err_msg=col)
        else:
            assert (a.to_numpy() == b.to_numpy()).all(), col


@pytest.mark.parametrize("name", CASES)
def test_timeline_matches_cli_csv(cli_runs, py_runs, name):
    assert_same_table(py_runs[name].timeline, cli_runs[name][2])


@pytest.mark.parametrize("name", CASES)
def test_requests_match_cli_csv(cli_runs, py_runs, name):
    assert_same_table(py_runs[name].requests, cli_runs[name][3])


def test_table_dtypes(py_runs):
    r = py_runs["azure-conv-lesson"]
    t, q = r.timeline, r.requests
    assert len(t) == r.steps or len(t) >= r.steps  # logged steps include token-less preemptions
    assert t["step"].dtype == np.int64 and t["running"].dtype == np.int32
    assert t["time_s"].dtype == np.float64 and t["scheduled_tokens"].dtype == np.int64
    assert isinstance(t["admission_stop"].dtype, pd.CategoricalDtype)
    assert set(t["admission_stop"].cat.categories) >= {"queue_empty", "token_budget", "kv_cache"}
    assert len(q) == r["requests"]
    assert q["request_id"].dtype == np.int64 and q["prompt_tokens"].dtype == np.int32
    assert q["ttft_s"].dtype == np.float64
    assert list(q["status"].cat.categories) == ["finished", "rejected", "unfinished"]
    assert (q["status"] == "finished").sum() == r.finished


def test_tables_are_views_of_the_replay_records():
    trace = kvsim.read_trace(AZURE_CONV, max_requests=200)
    _, _, raw_t, raw_r, *_ = _kvsim.replay(trace._handle, {}, {}, {"timeline": True,
                                                               "requests": True})
    for raw in (raw_t, raw_r):
        for a in raw.values():
            assert not a.flags.owndata and not a.flags.writeable
            assert a.strides[0] > a.itemsize  # a column of the C++ records, not a copy
    df = _results.timeline_frame(raw_t)
    assert np.shares_memory(df["running"].to_numpy(), raw_t["running"])


def test_trace_path_is_accepted(cli):
    r = kvsim.replay(str(BURSTGPT), model="qwen2.5-7b")
    assert r.requests is None and r.timeline is None
    assert r.format == "burstgpt"


def test_without_pandas_tables_are_numpy(monkeypatch):
    from kvsim import _frames
    monkeypatch.setattr(_frames, "_pd", None)
    r = kvsim.replay(kvsim.read_trace(BURSTGPT), model="qwen2.5-7b", timeline=True,
                     requests=True)
    assert isinstance(r.timeline, dict) and isinstance(r.timeline["running"], np.ndarray)
    assert r.timeline["admission_stop"][0] in _kvsim.ADMISSION_STOP_NAMES
    assert set(r.requests["status"]) <= {"finished", "rejected", "unfinished"}


def test_errors_carry_the_cli_message(cli):
    kw = dict(model="qwen2.5-7b", max_num_batched_tokens=100, enable_chunked_prefill=False,
              max_model_len=4096)
    message = cli.error("replay", BURSTGPT, *flags(**kw), "--no-progress")
    with pytest.raises(ValueError) as e:
        kvsim.replay(kvsim.read_trace(BURSTGPT), **kw)
    assert str(e.value) == message


def test_release_arguments_carry_the_cli_message(cli):
    # --max-num-active-seqs is vLLM 0.33's: refused under 0.26 with the CLI's message.
    kw = dict(model="qwen2.5-7b", max_num_active_seqs=4, vllm_version="0.26")
    message = cli.error("replay", BURSTGPT, *flags(**kw), "--no-progress")
    assert "is not an engine argument of vLLM 0.26" in message
    with pytest.raises(ValueError) as e:
        kvsim.replay(kvsim.read_trace(BURSTGPT), **kw)
    assert str(e.value) == in_python_spelling(
        message, ("--max-num-active-seqs", "max_num_active_seqs="),
        ("--vllm-version 0.33", "vllm_version=0.33"))


def test_releases_agree_on_a_full_attention_replay_but_the_prefix_counters():
    t = kvsim.read_trace(BURSTGPT)
    old = kvsim.replay(t, model="qwen2.5-7b", vllm_version="0.26")
    now = kvsim.replay(t, model="qwen2.5-7b", vllm_version="0.33")
    # A full-attention model: only when prefix-cache lookups are counted differs.
    for key in ("finished", "rejected", "steps", "num_gpu_blocks", "preemptions",
                "admission_prefix_hit_tokens", "evictions"):
        assert old[key] == now[key], key
    assert old.vllm_version == "0.26" and now.vllm_version == "0.33"


def test_keyword_errors():
    t = kvsim.read_trace(BURSTGPT)
    with pytest.raises(ValueError, match="max_num_seqs must be > 0"):
        kvsim.replay(t, max_num_seqs=0)
    with pytest.raises(ValueError, match="swap_space_gib= needs preemption_mode=swap"):
        kvsim.replay(t, swap_space_gib=8)
    with pytest.raises(ValueError, match="scheduling_policy must be one of"):
        kvsim.replay(t, scheduling_policy="lifo")
    with pytest.raises(TypeError, match="kvsim.Trace or a path"):
        kvsim.replay([1, 2, 3])


def test_all_rejected_warns_like_the_cli_exit_status(cli):
    kw = dict(model="qwen2.5-7b", max_model_len=1)
    run = cli.run("replay", BURSTGPT, *flags(**kw), "--no-progress", check=False)
    assert run.returncode == 2
    # The same message (the run room's), without the CLI's "no output file was changed".
    message = run.stderr.splitlines()[-1].removeprefix("kvsim: error: ")
    message = message.removesuffix("; no output file was changed")
    with pytest.warns(RuntimeWarning) as warned:
        r = kvsim.replay(kvsim.read_trace(BURSTGPT), **kw)
    assert str(warned[0].message).startswith(message + "; ")
    assert r.rejected == r["requests"]


def test_replay_releases_the_gil():
    # A replay whose length does not follow the engine's speed: check_invariants walks the whole
    # pool after every step (~0.5 s for these 200 requests here, still ~0.2 s on a machine 2.5x
    # faster). A plain replay became ~50 ms and then less, too short to tell a held GIL from a
    # late wake-up of the sleeping thread below when ctest runs other tests beside this one.
    trace = kvsim.read_trace(AZURE_CONV, max_requests=200)
    done = threading.Event()
    result = []

    def work():
        result.append(kvsim.replay(trace, model="qwen2.5-7b", check_invariants=True))
        done.set()

    th = threading.Thread(target=work)
    ticks = [time.monotonic()]
    th.start()
    while not done.is_set():
        time.sleep(0.002)
        ticks.append(time.monotonic())
    th.join()
    wall = result[0].wall_seconds
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    # With the GIL held for the whole replay this thread would wake once or twice, the last gap
    # spanning the replay; released, it ticks about every 2 ms.
    assert wall > 0.05 and len(ticks) >= 10 and max(gaps) < wall / 2, (len(ticks), max(gaps), wall)


def test_ctrl_c_interrupts_a_long_replay():
    trace = kvsim.read_trace(AZURE_CONV)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        # check_invariants makes this replay take minutes.
        kvsim.replay(trace, model="qwen2.5-7b", check_invariants=True)
    timer.join()
    assert time.monotonic() - start < 30


def test_steady_decode_is_speed_only_as_in_the_cli(cli):
    t = kvsim.read_trace(BURSTGPT)
    fast = kvsim.replay(t, model="qwen2.5-7b", timeline=True)
    general = kvsim.replay(t, model="qwen2.5-7b", steady_decode=False, timeline=True)
    assert without_wall(fast.to_dict()) == without_wall(general.to_dict())
    for col in fast.timeline:  # a DataFrame or, without pandas, a dict of arrays
        np.testing.assert_array_equal(np.asarray(fast.timeline[col]),
                                      np.asarray(general.timeline[col]), err_msg=col)
    expected = cli.json("replay", BURSTGPT, "--model", "qwen2.5-7b", "--no-steady-decode",
                        "--no-progress", "--json", "-")
    assert without_wall(general.to_dict()) == without_wall(expected)
