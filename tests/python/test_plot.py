"""Figures from Python results (ReplayResult.plot, ClusterReplayResult.plot, SizeReport.plot,
kvsim.plot_sweep): the figure code of tools/plot_*.py (kvsim/_plots.py, one copy), drawn in
process. The figure drawn from the Python tables is the one the plot scripts draw from the CLI's
files (same lines, same data). Skipped without matplotlib, except the message that asks for it.
"""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import kvsim

from conftest import BURSTGPT, ROOT

SMALL = dict(model="qwen2.5-7b", max_model_len=4096, step_time="fixed:5")


def _matplotlib():
    return pytest.importorskip("matplotlib")


def _lines(fig):
    """Every line of every axes: (axes title, label, x, y)."""
    out = []
    for ax in fig.axes:
        for line in ax.get_lines():
            out.append((ax.get_title(), line.get_label(), np.asarray(line.get_xdata(), float),
                        np.asarray(line.get_ydata(), float)))
    return out


def _same_figure(a, b):
    la, lb = _lines(a), _lines(b)
    assert [x[:2] for x in la] == [x[:2] for x in lb]
    for (title, label, xa, ya), (_, _, xb, yb) in zip(la, lb):
        np.testing.assert_allclose(xa, xb, rtol=1e-6, err_msg=f"{title}: {label} x")
        np.testing.assert_allclose(ya, yb, rtol=1e-6, err_msg=f"{title}: {label} y")
    assert [ax.get_title() for ax in a.axes] == [ax.get_title() for ax in b.axes]


def _tools():
    """tools/plot_common.py (the scripts' file reading) from the source tree."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return importlib.import_module("plot_common")
    finally:
        sys.path.pop(0)


def test_replay_plot_is_the_scripts_figure(cli, tmp_path):
    _matplotlib()
    r = kvsim.replay(BURSTGPT, **SMALL, timeline=True, requests=True)
    fig = r.plot(tmp_path / "r.png", title="BurstGPT")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[:2] == ["Concurrency vs the capacity formula", "KV usage and last-block padding"]
    assert sum("CDF" in t for t in titles) == 3
    assert fig._suptitle.get_text() == "BurstGPT"

    # The same figure from the CLI's files, read as tools/plot_replay.py reads them.
    files = {k: tmp_path / f"{k}.out" for k in ("json", "timeline", "requests")}
    cli.run("replay", BURSTGPT, *sum(([f"--{k}", p] for k, p in files.items()), []),
            "--no-progress", "--model", "qwen2.5-7b", "--max-model-len", 4096,
            "--step-time", "fixed:5")
    pc = _tools()
    plots = pc.plots
    timeline = pc.table(pc.read_csv(str(files["timeline"])), plots.REPLAY_TIMELINE)
    requests = pc.table(pc.read_csv(str(files["requests"])), plots.REQUESTS[1:],
                        plots.REQUESTS[:1])
    from_files = plots.replay_figure(timeline, pc.read_json(str(files["json"])), requests,
                                     title="BurstGPT")
    _same_figure(fig, from_files)


def test_replay_plot_without_requests_and_without_timeline(tmp_path):
    _matplotlib()
    fig = kvsim.replay(BURSTGPT, **SMALL, timeline=True).plot()
    assert len(fig.axes) == 3  # concurrency, KV usage and its padding twin: no CDFs
    with pytest.raises(ValueError, match=r"timeline=True"):
        kvsim.replay(BURSTGPT, **SMALL).plot()


def test_cluster_plot_draws_each_replica_and_the_slo(tmp_path):
    _matplotlib()
    r = kvsim.replay(BURSTGPT, **SMALL, replicas=3, router="round-robin", slo_ttft_p99=1.0,
                     timeline=True, requests=True)
    fig = r.plot(tmp_path / "c.svg")
    assert b"<svg" in (tmp_path / "c.svg").read_bytes()
    assert fig.axes[0].get_title() == "Running requests per replica (3 replicas, round-robin)"
    assert [ln.get_label() for ln in fig.axes[0].get_lines()][:3] == [
        "replica 0", "replica 1", "replica 2"]
    ttft = next(ax for ax in fig.axes if ax.get_title().startswith("TTFT"))
    assert any(ln.get_label().startswith("SLO p99 <= 1 s") for ln in ttft.get_lines())
    # One replica (an SLO alone): the single-engine figure.
    one = kvsim.replay(BURSTGPT, **SMALL, slo_ttft_p99=1.0, timeline=True).plot()
    assert one.axes[0].get_title() == "Concurrency vs the capacity formula"


def test_plot_sweep_is_the_scripts_figure(cli, tmp_path):
    _matplotlib()
    df = kvsim.sweep(BURSTGPT, block_sizes=[8, 16, 32], kv_cache_dtypes=["auto", "fp8"], **SMALL)
    fig = kvsim.plot_sweep(df, tmp_path / "s.pdf")
    assert (tmp_path / "s.pdf").read_bytes()[:4] == b"%PDF"
    assert [ax.get_title() for ax in fig.axes] == [
        "Padding share of used KV", "Padding per live sequence", "Concurrency"]
    csv = tmp_path / "s.csv"
    cli.run("sweep", BURSTGPT, "--block-sizes", "8,16,32", "--kv-cache-dtypes", "auto,fp8",
            "--model", "qwen2.5-7b", "--max-model-len", 4096, "--step-time", "fixed:5", "-q",
            "--csv", csv)
    pc = _tools()
    plots = pc.plots
    numeric = [c for c in plots.SWEEP if c != "kv_cache_dtype"]
    _same_figure(fig, plots.sweep_figure(pc.table(pc.read_csv(str(csv)), numeric,
                                                  ["kv_cache_dtype"])))


def test_size_plot(tmp_path):
    _matplotlib()
    report = kvsim.size(BURSTGPT, model="qwen2.5-7b", max_model_len=4096, slo_ttft_p99=5,
                        slo_tpot_p99=1, gpus="l40s,h100-80g", tp=[1, 2], max_replicas=2)
    fig = report.plot(tmp_path / "z.png")
    assert (tmp_path / "z.png").read_bytes()[:4] == b"\x89PNG"
    assert fig._suptitle.get_text().startswith("kvsim size: qwen2.5-7b on ")
    assert len(fig.axes) == 2


def test_plot_without_matplotlib_says_what_to_install(monkeypatch):
    r = kvsim.replay(BURSTGPT, **SMALL, timeline=True)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "kvsim._plots", raising=False)
    monkeypatch.delattr(kvsim, "_plots", raising=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"plot\(\) needs matplotlib"):
        r.plot()
