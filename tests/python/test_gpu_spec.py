"""gpu_spec= (a card from a JSON file) resolves exactly as the CLI's --gpu-spec, with the same
one-line messages; the newer presets are listed in GPU_PRESETS."""

from __future__ import annotations

import json

import pytest

import kvsim
from conftest import ROOT, flags, in_python_spelling

# h100-80g's figures (core/src/gpu_presets.cpp), under its own name.
H100 = {"name": "h100-80g", "vram_gib": 80, "peak_bf16_tflops": 989.4, "hbm_gb_per_s": 3350,
        "peak_fp8_tflops": 1978.9, "interconnect_gb_per_s": 900, "interconnect_latency_us": 37}


def test_new_presets_are_listed():
    for name in ("rtx-pro-6000", "rtx5090", "b200", "gb200", "h20", "l20", "mi325x", "mi355x"):
        assert name in kvsim.GPU_PRESETS


def test_spec_equal_to_a_preset_plans_the_same(tmp_path, cli):
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(H100))
    base = dict(model="llama-3.1-8b", max_model_len=8192, tensor_parallel_size=2)
    from_file = kvsim.plan(**base, gpu_spec=path)
    assert from_file.to_dict() == kvsim.plan(**base, gpu="h100-80g").to_dict()
    assert from_file.to_dict() == cli.json("plan", *flags(**base), "--gpu-spec", path, "--json")
    assert kvsim.plan(**base, gpu_spec=str(path)).to_dict() == from_file.to_dict()


@pytest.mark.parametrize("spec", [
    {k: v for k, v in H100.items() if k != "hbm_gb_per_s"},        # a missing key
    {**H100, "hbm_gb_per_s": -1},                                    # a negative value
    {**H100, "tdp_watts": 700},                                      # an unknown key
    "name: h100",                                                    # not JSON
])
def test_bad_files_have_the_cli_message(tmp_path, cli, spec):
    path = tmp_path / "card.json"
    path.write_text(spec if isinstance(spec, str) else json.dumps(spec, indent=1))
    message = cli.error("plan", "--model", "qwen2.5-7b", "--gpu-spec", path)
    assert str(path) in message and "\n" not in message
    with pytest.raises(RuntimeError) as e:
        kvsim.plan(model="qwen2.5-7b", gpu_spec=path)
    assert str(e.value) == message


def test_gpu_spec_is_exclusive_with_gpu_and_vram_gib(tmp_path, cli):
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(H100))
    for other in (dict(gpu="l4"), dict(vram_gib=24.0)):
        message = cli.error("plan", "--model", "qwen2.5-7b", "--gpu-spec", path, *flags(**other))
        with pytest.raises(ValueError) as e:
            kvsim.plan(model="qwen2.5-7b", gpu_spec=path, **other)
        name = next(iter(other))
        assert str(e.value) == in_python_spelling(
            message, ("--gpu-spec", "gpu_spec="), (flags(**other)[0], name + "="))


def test_gpu_spec_must_be_a_path():
    with pytest.raises(TypeError, match=r"^plan\(\): gpu_spec must be a path"):
        kvsim.plan(model="qwen2.5-7b", gpu_spec=80)


def test_replay_takes_gpu_spec(tmp_path):
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(H100))
    trace = kvsim.read_trace(ROOT / "tests" / "data" / "traces" / "azure_head.csv.gz")
    base = dict(model="llama-3.1-8b", max_model_len=8192, step_time="roofline")
    a = kvsim.replay(trace, **base, gpu="h100-80g").to_dict()
    b = kvsim.replay(trace, **base, gpu_spec=path).to_dict()
    a.pop("wall_seconds")
    b.pop("wall_seconds")
    assert a == b
