"""kvsim.sweep: the rows of `kvsim sweep --csv`."""

import io

import numpy as np
import pytest

import kvsim
from conftest import AZURE_CONV, flags

pd = pytest.importorskip("pandas")


def test_sweep_matches_cli_csv(cli):
    kw = dict(model="qwen2.5-7b", gpu="rtx4090", kv_cache_dtype="fp8", max_model_len=8192)
    out = cli.run("sweep", AZURE_CONV, "--max-requests", 400, *flags(**kw), "--block-sizes",
                  "8,16,64", "--max-num-seqs", "64,256", "--csv", "-", "--quiet").stdout
    expected = pd.read_csv(io.StringIO(out)).drop(columns="sweep_id")
    got = kvsim.sweep(kvsim.read_trace(AZURE_CONV, max_requests=400), **kw,
                      block_sizes=[8, 16, 64], max_num_seqs=[64, 256], jobs=2)
    assert got.shape == (6, expected.shape[1])
    assert list(got.columns) == list(expected.columns)
    for col in got.columns:
        if got[col].dtype == object:
            assert got[col].tolist() == expected[col].tolist(), col
        else:
            np.testing.assert_array_equal(got[col].to_numpy(), expected[col].to_numpy(), col)
    assert got["block_size"].dtype == np.int64
    assert got["mean_running"].dtype == np.float64


def test_sweep_errors():
    t = kvsim.read_trace(AZURE_CONV, max_requests=50)
    with pytest.raises(ValueError, match="no model"):
        kvsim.sweep(t, block_sizes=[16])
    with pytest.raises(TypeError, match="must be a list"):
        kvsim.sweep(t, model="qwen2.5-7b", block_sizes=16)
    with pytest.raises(ValueError):
        kvsim.sweep(t, model="qwen2.5-7b", block_sizes=[16, 16])
