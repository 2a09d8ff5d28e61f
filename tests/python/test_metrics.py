"""replay(metrics=PATH, vllm_log=PATH): the same bytes as `kvsim replay --metrics/--vllm-log`
(docs/metrics.md), written atomically; the tables stay as asked."""
import pytest

import kvsim

from conftest import BURSTGPT

ARGS = dict(time_scale=0.02, num_gpu_blocks_override=400)


def test_metrics_and_log_match_the_cli(cli, tmp_path):
    cli.run("replay", str(BURSTGPT), "--time-scale", "0.02", "--num-gpu-blocks-override", "400",
            "--metrics-interval", "5", "--metrics-start", "1700000000",
            "--metrics", str(tmp_path / "cli.om"), "--vllm-log", str(tmp_path / "cli.log"))
    t = kvsim.read_trace(BURSTGPT, time_scale=0.02)
    r = kvsim.replay(t, num_gpu_blocks_override=400, metrics=tmp_path / "py.om",
                     metrics_interval=5.0, metrics_start=1700000000,
                     vllm_log=str(tmp_path / "py.log"))
    assert (tmp_path / "py.om").read_bytes() == (tmp_path / "cli.om").read_bytes()
    assert (tmp_path / "py.log").read_bytes() == (tmp_path / "cli.log").read_bytes()
    text = (tmp_path / "py.om").read_text()
    assert text.endswith("# EOF\n")
    assert 'vllm:num_requests_running{model_name="qwen2.5-7b",engine="0"}' in text
    assert r.timeline is None and r.requests is None  # not asked for
    assert [p.name for p in tmp_path.iterdir() if ".kvsim-" in p.name] == []


def test_cluster_metrics_have_one_engine_per_replica(tmp_path):
    kvsim.replay(BURSTGPT, replicas=2, metrics=tmp_path / "m.om")
    text = (tmp_path / "m.om").read_text()
    assert 'engine="0"' in text and 'engine="1"' in text and 'engine="2"' not in text


def test_bad_metrics_keywords(tmp_path):
    with pytest.raises(TypeError, match="metrics must be a path"):
        kvsim.replay(BURSTGPT, metrics=3)
    with pytest.raises(ValueError, match="metrics_interval="):
        kvsim.replay(BURSTGPT, metrics=tmp_path / "m.om", metrics_interval=0.0005)
    assert not (tmp_path / "m.om").exists()
