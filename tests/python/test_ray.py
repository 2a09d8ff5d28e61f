"""kvsim.size / kvsim.sweep with executor="ray": the shards run as Ray tasks on a local Ray cluster
(ray.init(num_cpus=2)) and are merged by the CLI's merge code; the result must equal the
in-process one exactly (the report dict and table text, every DataFrame column). Skipped when
Ray is not installed (pip install kvsim[ray]); the merge bindings and the ImportError without
Ray are tested either way."""

import sys

import numpy as np
import pytest

import kvsim
from kvsim import _kvsim
from conftest import AZURE_CONV, MOONCAKE

pd = pytest.importorskip("pandas")

SWEEP_KW = dict(model="qwen2.5-7b", gpu="rtx4090", kv_cache_dtype="fp8", max_model_len=8192)
# size: feasible, SLO-unreachable, does-not-fit and invalid candidates, over 6 (card, TP) groups.
SIZE_CASES = {
    "azure-conv": (AZURE_CONV, dict(max_requests=300, time_scale=0.2),
                   dict(model="qwen2.5-7b", slo_ttft_p99=1, slo_tpot_p99=0.05,
                        gpus=["l40s", "h100-80g", "rtx4090"], tp=[1, 2],
                        kv_cache_dtype=["auto", "fp8"], router="least-outstanding",
                        max_replicas=8)),
    "mooncake-70b": (MOONCAKE, dict(max_requests=200),
                     dict(model="llama-3.1-70b", max_model_len=131072, slo_ttft_p99=2,
                          slo_tpot_p99=0.1, gpus="l40s,h100-80g", tp=[1, 3, 4],
                          block_sizes=[16, 32], max_num_seqs=64, router="prefix-affinity",
                          router_seed=3, max_replicas=4, jobs=2)),
}


def assert_frames_equal(got, expected):
    assert list(got.columns) == list(expected.columns)
    assert got.shape == expected.shape
    for col in got.columns:
        assert got[col].dtype == expected[col].dtype, col
        if got[col].dtype == object:
            assert got[col].tolist() == expected[col].tolist(), col
        else:
            np.testing.assert_array_equal(got[col].to_numpy(), expected[col].to_numpy(), col)


# ---- without Ray: the merge bindings, the executor keyword's errors ----

def test_merged_sweep_shards_equal_the_unsharded_csv():
    t = kvsim.read_trace(AZURE_CONV, max_requests=200)
    args = ({"model": "qwen2.5-7b", "gpu": "rtx4090", "max_model_len": 8192}, {},
            [8, 16, 64], [], [], [], [64, 256], [], 1)
    whole = _kvsim.sweep(t._handle, *args)
    shards = [(f"s{i}", _kvsim.sweep(t._handle, *args, shard=f"{i}/4")) for i in range(4)]
    assert _kvsim.merge_sweep_csvs(shards[::-1]) == whole
    with pytest.raises(ValueError, match="missing"):
        _kvsim.merge_sweep_csvs(shards[:3])


def test_without_ray_the_executor_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    t = kvsim.read_trace(AZURE_CONV, max_requests=50)
    with pytest.raises(ImportError, match=r"pip install kvsim\[ray\]"):
        kvsim.sweep(t, **SWEEP_KW, block_sizes=[16], executor="ray")
    with pytest.raises(ImportError, match=r"pip install kvsim\[ray\]"):
        kvsim.size(t, **SIZE_CASES["azure-conv"][2], executor="ray")


def test_an_unknown_executor_is_refused():
    t = kvsim.read_trace(AZURE_CONV, max_requests=50)
    with pytest.raises(ValueError, match="executor must be None or one of 'ray'"):
        kvsim.sweep(t, **SWEEP_KW, block_sizes=[16], executor="slurm")


# ---- on a local Ray cluster ----

@pytest.fixture(scope="module")
def ray():
    try:
        import ray
    except ImportError:
        pytest.skip("Ray is not installed (pip install kvsim[ray])")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.filterwarnings("ignore:no candidate meets the SLO")  # mooncake-70b: none is feasible
@pytest.mark.parametrize("name", SIZE_CASES)
def test_size_on_ray_equals_the_unsharded_search(ray, name):
    path, read_kw, kw = SIZE_CASES[name]
    t = kvsim.read_trace(path, **read_kw)
    expected = kvsim.size(t, **kw)
    got = kvsim.size(t, **kw, executor="ray")
    assert got.to_dict() == expected.to_dict()
    assert got.table == expected.table
    assert_frames_equal(got.candidates, expected.candidates)
    assert got.num_candidates > 4


def test_sweep_on_ray_equals_the_unsharded_sweep(ray):
    t = kvsim.read_trace(AZURE_CONV, max_requests=400)
    grid = dict(block_sizes=[8, 16, 64], max_num_seqs=[64, 256])
    expected = kvsim.sweep(t, **SWEEP_KW, **grid)
    assert_frames_equal(kvsim.sweep(t, **SWEEP_KW, **grid, executor="ray"), expected)
    assert_frames_equal(kvsim.sweep(t, **SWEEP_KW, **grid, jobs=2, executor="ray"), expected)


def test_a_trace_built_from_columns_travels_as_columns(ray):
    df = kvsim.read_trace(MOONCAKE, max_requests=150).to_pandas()
    t = kvsim.Trace.from_pandas(df, hash_block_size=512, name="mooncake-columns")
    grid = dict(block_sizes=[16, 32], gpu_memory_utilizations=[0.8, 0.9])
    expected = kvsim.sweep(t, **SWEEP_KW, **grid)
    assert expected["prefix_cache_hit_rate"].max() > 0  # the hash ids came along
    assert_frames_equal(kvsim.sweep(t, **SWEEP_KW, **grid, executor="ray"), expected)


def test_a_shard_error_is_raised_as_in_process(ray):
    t = kvsim.read_trace(AZURE_CONV, max_requests=50)
    with pytest.raises(ValueError) as in_process:
        kvsim.sweep(t, **{**SWEEP_KW, "gpu": "no-such-gpu"}, block_sizes=[16, 32])
    with pytest.raises(ValueError) as on_ray:
        kvsim.sweep(t, **{**SWEEP_KW, "gpu": "no-such-gpu"}, block_sizes=[16, 32],
                    executor="ray")
    assert str(on_ray.value) == str(in_process.value)
