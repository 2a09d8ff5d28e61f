"""kvsim.read_trace / kvsim.Trace: the CLI's reader, columns, DataFrames, errors."""

import numpy as np
import pytest

import kvsim
from conftest import AZURE_CONV, BURSTGPT, MOONCAKE, SHAREGPT, VIDUR, flags

pd = pytest.importorskip("pandas")


def test_azure_conv_reads_whole():
    t = kvsim.read_trace(AZURE_CONV)
    assert len(t) == 19366
    assert t.format == "azure"
    assert t.rows_read == 19366
    first = t[0]
    assert isinstance(first, kvsim.TraceRequest)
    assert first.arrival_s == 0.0
    assert first.input_tokens > 0
    assert 3000 < t[-1].arrival_s < 3600  # one hour of requests


def test_iteration_and_columns_agree():
    t = kvsim.read_trace(BURSTGPT)
    rows = list(t)
    assert len(rows) == len(t)
    c = t.columns()
    assert [r.input_tokens for r in rows] == c["input_tokens"].tolist()
    assert np.all(np.diff(c["arrival_ns"]) >= 0)


@pytest.mark.parametrize("path,fmt", [(AZURE_CONV, "azure"), (MOONCAKE, "mooncake"),
                                      (BURSTGPT, "burstgpt"), (VIDUR, "vidur"),
                                      (SHAREGPT, "sharegpt")])
def test_to_pandas_shape_and_dtypes(path, fmt):
    t = kvsim.read_trace(path, max_requests=300)
    df = t.to_pandas()
    assert t.format == fmt
    assert len(df) == len(t) == min(300, t.rows_read - sum(t.dropped.values()))
    assert df["arrival_s"].dtype == np.float64
    assert df["input_tokens"].dtype == np.int32
    assert df["output_tokens"].dtype == np.int32
    assert df["source_line"].dtype == np.int64
    if fmt == "mooncake":
        assert df["hash_ids"].map(len).gt(0).all()


def test_window_options_match_the_cli(cli):
    kw = dict(start=60.0, duration=120.0, max_requests=200, time_scale=0.5)
    t = kvsim.read_trace(AZURE_CONV, **kw)
    summary = cli.json("replay", AZURE_CONV, *flags(**kw), "--json", "-", "--no-progress")
    assert len(t) == summary["requests"]


def test_poisson_needs_rate_like_the_cli():
    with pytest.raises(ValueError, match="needs rate"):
        kvsim.read_trace(AZURE_CONV, arrival="poisson")
    with pytest.raises(ValueError, match="rate= needs arrival=poisson"):
        kvsim.read_trace(AZURE_CONV, rate=2.0)
    t = kvsim.read_trace(AZURE_CONV, arrival="poisson", rate=10.0, seed=7, max_requests=50)
    assert t.arrival_mode == "poisson" and len(t) == 50


def test_malformed_row_raises_trace_error_with_the_cli_message(cli, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                   "2023-11-16 18:15:46.6805900,374,44\n"
                   "2023-11-16 18:15:50.9951690,-5,44\n")
    message = cli.error("replay", bad, "--no-progress")
    with pytest.raises(kvsim.TraceError) as e:
        kvsim.read_trace(bad)
    assert str(e.value) == message
    assert (e.value.path, e.value.line, e.value.field) == (str(bad), 3, "ContextTokens")
    assert isinstance(e.value, ValueError)


def test_skip_bad_rows_counts_and_warns(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                   "2023-11-16 18:15:46.6805900,374,44\n"
                   "2023-11-16 18:15:50.9951690,x,44\n")
    with pytest.warns(UserWarning, match="rows dropped"):
        t = kvsim.read_trace(bad, skip_bad_rows=True)
    assert len(t) == 1 and sum(t.dropped.values()) == 1


def test_missing_file_is_an_error():
    with pytest.raises(RuntimeError, match="no-such-file.csv"):
        kvsim.read_trace("no-such-file.csv")


def test_from_arrays_sorts_and_rebases():
    t = kvsim.Trace.from_arrays([10.5, 10.0, 12.0], [100, 200, 300], [5, 6, 7],
                                priority=[1, 2, 3])
    assert len(t) == 3 and t.format == "kvsim" and t.path == "<arrays>"
    assert [r.input_tokens for r in t] == [200, 100, 300]
    assert [r.arrival_s for r in t] == [0.0, 0.5, 2.0]
    assert [r.source_line for r in t] == [2, 1, 3]
    assert [r.priority for r in t] == [2, 1, 3]


def test_from_pandas_round_trip():
    t = kvsim.read_trace(MOONCAKE, max_requests=100)
    df = t.to_pandas()
    back = kvsim.Trace.from_pandas(df, hash_block_size=512)
    pd.testing.assert_frame_equal(
        back.to_pandas().drop(columns="source_line"), df.drop(columns="source_line"))


def test_from_arrays_errors_name_row_and_column():
    with pytest.raises(kvsim.TraceError) as e:
        kvsim.Trace.from_arrays([0.0, 1.0], [10, -1], [1, 1], name="mine")
    assert str(e.value) == "mine:2: field 'input_tokens': negative token count (got '-1')"
    assert (e.value.line, e.value.field) == (2, "input_tokens")
    with pytest.raises(kvsim.TraceError, match="arrival_s"):
        kvsim.Trace.from_arrays([0.0, float("nan")], [10, 1], [1, 1])
    with pytest.raises(ValueError, match="has 1 rows"):
        kvsim.Trace.from_arrays([0.0, 1.0], [10], [1, 1])
    with pytest.raises(TypeError, match="integers"):
        kvsim.Trace.from_arrays([0.0], [1.5], [1])
    with pytest.raises(ValueError, match="missing column"):
        kvsim.Trace.from_pandas(pd.DataFrame({"arrival_s": [0.0]}))
