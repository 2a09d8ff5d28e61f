"""kvsim.plan: the numbers and keys of `kvsim plan --json`, errors with the CLI's message."""

import pytest

import kvsim
from conftest import LESSON, flags


def test_lesson_plan_numbers():
    p = kvsim.plan(**LESSON, concurrency=64, vllm_version="0.26")
    assert isinstance(p, kvsim.Plan)
    assert p.kappa_bytes == 28672
    assert p.max_concurrency == 66
    assert p.max_context_tokens == 8484
    assert p.num_gpu_blocks == 33938
    assert p.gpu_kv_cache_tokens == 543008
    assert p.vllm_log_lines == ["GPU KV cache size: 543,008 tokens",
                                "Maximum concurrency for 8,192 tokens per request: 66.29x"]
    assert p["kappa_bytes"] == p.kappa_bytes
    assert "kappa_bytes" in dir(p)
    # vLLM 0.33 (the default) prints the same numbers on one line.
    now = kvsim.plan(**LESSON, concurrency=64)
    assert now.num_gpu_blocks == p.num_gpu_blocks
    assert now.vllm_log_lines == ["GPU KV cache size: 543,008 tokens, Maximum concurrency for "
                                  "8,192 tokens per request: 66.29x"]


def test_vllm_version_keyword():
    assert kvsim.plan(**LESSON, vllm_version="0.33.0").vllm_log_lines == \
        kvsim.plan(**LESSON).vllm_log_lines
    with pytest.raises(ValueError, match=r"vllm_version=0.27: unknown vLLM release "
                                         r"\(expected 0.26 or 0.33\)"):
        kvsim.plan(**LESSON, vllm_version="0.27")


@pytest.mark.parametrize("kwargs", [
    dict(LESSON, concurrency=64),
    dict(model="qwen2.5-7b", gpu="rtx4090"),
    dict(model="qwen2.5-7b", gpu="h100-80g", kv_cache_dtype="fp8", tensor_parallel_size=2,
         block_size=32),
    dict(num_layers=32, num_kv_heads=8, head_dim=128, vram_gib=48.0, weights_gib=16.0,
         max_model_len=32768),
    dict(model="qwen2.5-7b", num_gpu_blocks_override=1000, max_model_len=4096),
    # Hybrid models: the plan-only scheduler knobs and the hybrid manager switch.
    dict(model="gpt-oss-20b", gpu="h100-80g", kv_cache_memory_bytes=10737418240,
         max_model_len=32768),
    dict(model="gpt-oss-20b", gpu="h100-80g", kv_cache_memory_bytes=10737418240,
         max_model_len=32768, async_scheduling=False, max_num_batched_tokens=2048),
    dict(model="gpt-oss-20b", gpu="h100-80g", kv_cache_memory_bytes=10737418240,
         max_model_len=32768, disable_hybrid_kv_cache_manager=True),
    dict(model="gemma-3-27b", gpu="h100-80g", max_model_len=16384, max_num_seqs=64),
])
def test_plan_matches_cli_json(cli, kwargs):
    expected = cli.json("plan", *flags(**kwargs), "--json")
    got = kvsim.plan(**kwargs)
    assert got.to_dict() == expected
    assert list(got) == list(expected)  # same keys in the same order


def test_does_not_fit_has_the_cli_message(cli):
    kwargs = dict(model="qwen2.5-7b", gpu="rtx4090", weights_gib=23.0)
    message = cli.error("plan", *flags(**kwargs))
    with pytest.raises(kvsim.DoesNotFitError) as e:
        kvsim.plan(**kwargs)
    assert str(e.value) == message
    assert isinstance(e.value, ValueError)


def test_unknown_model_has_the_cli_message(cli):
    message = cli.error("plan", "--model", "no-such-model")
    with pytest.raises(ValueError) as e:
        kvsim.plan(model="no-such-model")
    assert str(e.value) == message


def test_keyword_types_and_ranges_are_checked():
    with pytest.raises(TypeError, match="max_model_len must be an integer"):
        kvsim.plan(model="qwen2.5-7b", max_model_len="8192")
    with pytest.raises(ValueError, match="max_model_len must be > 0"):
        kvsim.plan(model="qwen2.5-7b", max_model_len=0)
    with pytest.raises(TypeError):
        kvsim.plan(model="qwen2.5-7b", no_such_flag=1)
    with pytest.raises(TypeError):
        kvsim.plan("qwen2.5-7b")  # keyword-only, as the CLI's flags


def test_presets_are_listed():
    assert "qwen2.5-7b" in kvsim.MODEL_PRESETS
    assert "rtx4090" in kvsim.GPU_PRESETS


def test_hybrid_plan_lines_are_vllms():
    # tests/data/vllm_plan_goldens/0.26/gpt-oss-20b_10g_32k.json: logged by vLLM 0.26.0.
    p = kvsim.plan(model="gpt-oss-20b", gpu="h100-80g", kv_cache_memory_bytes=10737418240,
                   max_model_len=32768, vllm_version="0.26")
    assert p.vllm_log_lines == ["GPU KV cache size: 290,413 tokens",
                                "Maximum concurrency for 32,768 tokens per request: 8.86x"]
    off = kvsim.plan(model="gpt-oss-20b", gpu="h100-80g", kv_cache_memory_bytes=10737418240,
                     max_model_len=32768, disable_hybrid_kv_cache_manager=True,
                     vllm_version="0.26")
    assert off.vllm_log_lines[1].endswith(": 6.67x")
