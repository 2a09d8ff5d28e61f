#!/usr/bin/env python3
"""Records vLLM 0.26.0's or 0.33.0's KV-cache sizing for hybrid and full-attention models.

For each case this script builds the per-layer KV cache specs the model's attention layers report
(vllm/model_executor/layers/attention/attention.py get_kv_cache_spec: SlidingWindowSpec for a layer
with a window, ChunkedLocalAttentionSpec for Llama 4's RoPE layers, FullAttentionSpec otherwise),
a VllmConfig with the case's max_model_len, max_num_batched_tokens, async scheduling and hybrid
manager setting, and calls vLLM's own get_kv_cache_configs() with the case's KV budget, exactly as
EngineCore._initialize_kv_caches does. It writes, per case, the KV cache groups, num_blocks, the
tensors, each spec's max_memory_usage_bytes and admission cap, and the start-up log lines as
vLLM logged them, to tests/data/vllm_plan_goldens/<release>/<case>.json (release "0.26" or "0.33",
from the venv's wheel; versions.py). tests/core/test_planner_hybrid.cpp compares kvsim's plan with
every file; CI never needs vLLM.

Per release (what the harness does differently; see README.md for the golden fields):
  0.26: get_kv_cache_configs (v1/core/kv_cache_utils.py) logs "GPU KV cache size" and "Maximum
        concurrency" itself (two lines); KVCacheTensor(size, shared_by).
  0.33: EngineCore resolves the KV cache layout first (FlashAttention declares none: vLLM's
        default preference, LBNHC), groups the layers (get_global_kv_cache_groups), calls
        v1/core/kv_cache_planning.get_kv_cache_configs, then logs one merged capacity line from
        update_kv_cache_capacity on the scheduler's config ("GPU" for a CUDA device);
        KVCacheTensor(size, layers, layer_stride, block_stride, offset). Its fit check keeps one
        block back, so a request needing exactly num_blocks blocks is refused: such a case's
        golden holds the error instead of the plan.
A case whose max_num_batched_tokens is None takes vLLM's default for `vllm serve` on the case's
card (EngineArgs._set_default_max_num_seqs_and_batched_tokens_args with the card's name and
memory in place of the device query).

Run with a vLLM venv (CPU only, a few seconds):
  /work/venv-vllm033/bin/python tools/vllm_conformance/plan_record.py --out tests/data/vllm_plan_goldens
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from versions import installed_release

# Just enough of an HF config for ModelConfig to resolve offline; the KV sizing reads only
# max_model_len from it (the specs are built here from the case's shape).
HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 1,
    "vocab_size": 1000,
    "max_position_embeddings": 16_777_216,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}

GIB = 1 << 30


@dataclass
class Model:
    """The KV shape of one checkpoint as kvsim's preset of the same name has it."""

    preset: str
    num_layers: int
    num_kv_heads: int
    head_dim: int
    # Per layer: "full", "sliding" or "chunked" (vLLM's model code decides which; see
    # sim/src/io/model_config.cpp for the rules this table follows).
    layer_types: list[str]
    sliding_window: int = 0
    attention_chunk_size: int = 0


def alternate(n: int) -> list[str]:  # gpt-oss: even layers sliding (gpt_oss.py layer_idx % 2 == 0)
    return ["sliding" if i % 2 == 0 else "full" for i in range(n)]


def gemma3(n: int, pattern: int = 6) -> list[str]:  # transformers Gemma3TextConfig.layer_types
    return ["sliding" if (i + 1) % pattern else "full" for i in range(n)]


def llama4(n: int, interval: int = 4) -> list[str]:  # no_rope_layers[i] == 0 -> full (NoPE)
    return ["chunked" if (i + 1) % interval else "full" for i in range(n)]


MODELS = {
    "gpt-oss-20b": Model("gpt-oss-20b", 24, 8, 64, alternate(24), sliding_window=128),
    "gpt-oss-120b": Model("gpt-oss-120b", 36, 8, 64, alternate(36), sliding_window=128),
    "gemma-3-12b": Model("gemma-3-12b", 48, 8, 256, gemma3(48), sliding_window=1024),
    "gemma-3-27b": Model("gemma-3-27b", 62, 16, 128, gemma3(62), sliding_window=1024),
    "llama-4-scout": Model("llama-4-scout", 48, 8, 128, llama4(48), attention_chunk_size=8192),
    "qwen3-8b": Model("qwen3-8b", 36, 8, 128, ["full"] * 36),
    "llama-3.1-8b": Model("llama-3.1-8b", 32, 8, 128, ["full"] * 32),
}


@dataclass
class Case:
    name: str
    model: str
    kv_cache_memory_bytes: int
    max_model_len: int
    # None: vLLM's `vllm serve` default for the card (gpu_name, gpu_memory_bytes).
    max_num_batched_tokens: int | None
    async_scheduling: bool = True
    # None: vLLM's default (off for chunked-local models unless
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1); True/False: the flag given.
    disable_hybrid_kv_cache_manager: bool | None = None
    block_size: int = 16
    kv_cache_dtype: str = "auto"  # auto (bf16) | fp8
    num_gpu_blocks_override: int | None = None
    extra: dict = field(default_factory=dict)
    # The card vLLM's batch defaults are read from (only with max_num_batched_tokens None).
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None
    # release ("0.26", "0.33") -> why this case is not recorded from that release.
    skip: dict = field(default_factory=dict)


CASES = [
    # gpt-oss-20b: H100 default batch (8192), async on, three budgets and two lengths.
    Case("gpt-oss-20b_40g_128k", "gpt-oss-20b", 40 * GIB, 131072, 8192),
    Case("gpt-oss-20b_10g_32k", "gpt-oss-20b", 10 * GIB, 32768, 8192),
    Case("gpt-oss-20b_10g_32k_sync", "gpt-oss-20b", 10 * GIB, 32768, 8192, async_scheduling=False),
    Case("gpt-oss-20b_10g_32k_mnbt2048", "gpt-oss-20b", 10 * GIB, 32768, 2048),
    Case("gpt-oss-20b_10g_32k_bs32", "gpt-oss-20b", 10 * GIB, 32768, 8192, block_size=32),
    Case("gpt-oss-20b_10g_32k_fp8", "gpt-oss-20b", 10 * GIB, 32768, 8192, kv_cache_dtype="fp8"),
    Case("gpt-oss-20b_10g_32k_nohybrid", "gpt-oss-20b", 10 * GIB, 32768, 8192,
         disable_hybrid_kv_cache_manager=True),
    Case("gpt-oss-20b_3g_4k", "gpt-oss-20b", 3 * GIB + 12345, 4096, 8192),
    Case("gpt-oss-20b_override", "gpt-oss-20b", 10 * GIB, 32768, 8192,
         num_gpu_blocks_override=5000),
    # gpt-oss-120b.
    Case("gpt-oss-120b_20g_128k", "gpt-oss-120b", 20 * GIB, 131072, 8192),
    Case("gpt-oss-120b_20g_128k_sync_2048", "gpt-oss-120b", 20 * GIB, 131072, 2048,
         async_scheduling=False),
    # Gemma 3: 5 sliding (1024) : 1 full; 27b has 62 layers (52 + 10: padding layers).
    Case("gemma-3-12b_20g_128k", "gemma-3-12b", 20 * GIB, 131072, 8192),
    Case("gemma-3-12b_20g_8k_2048", "gemma-3-12b", 20 * GIB, 8192, 2048),
    Case("gemma-3-27b_30g_128k", "gemma-3-27b", 30 * GIB, 131072, 8192),
    Case("gemma-3-27b_30g_32k_nohybrid", "gemma-3-27b", 30 * GIB, 32768, 8192,
         disable_hybrid_kv_cache_manager=True),
    # Llama 4 Scout: chunked local attention; hybrid manager off by default, on when asked.
    Case("llama-4-scout_40g_128k_default", "llama-4-scout", 40 * GIB, 131072, 8192),
    Case("llama-4-scout_40g_128k_hybrid", "llama-4-scout", 40 * GIB, 131072, 8192,
         disable_hybrid_kv_cache_manager=False),
    Case("llama-4-scout_60g_1m_hybrid", "llama-4-scout", 60 * GIB, 1048576, 8192,
         disable_hybrid_kv_cache_manager=False),
    # Full-attention models: the historical single-group layout.
    Case("qwen3-8b_20g_40k", "qwen3-8b", 20 * GIB, 40960, 8192),
    Case("llama-3.1-8b_16g_128k_2048", "llama-3.1-8b", 16 * GIB + 999, 131072, 2048,
         async_scheduling=False, block_size=32),
    # Exact fit (issue 26): a max_model_len request needs exactly num_blocks blocks. 0.26 starts
    # (concurrency 1.00x); 0.33 keeps one block back in its fit check and refuses to start.
    # qwen3-8b: 36 layers x 65,536 B pages = 2,359,296 B a block; 32k tokens = 2,048 blocks.
    Case("qwen3-8b_exact_fit_32k", "qwen3-8b", 2048 * 36 * 65536, 32768, 8192),
    # gpt-oss-20b 32k, async 8192: 2,048 full + 1,033 window blocks a request = 3,081.
    Case("gpt-oss-20b_exact_fit_override", "gpt-oss-20b", 10 * GIB, 32768, 8192,
         num_gpu_blocks_override=3081),
    # vLLM's default max_num_batched_tokens for `vllm serve` by card (issue 26): 0.33 adds a
    # >= 160 GiB tier (16384; 0.26: 8192 from 70 GiB up). A hybrid model, so the in-flight tokens
    # move the window group's blocks per request, the tokens and the concurrency.
    Case("gpt-oss-20b_b200_10g_32k_default", "gpt-oss-20b", 10 * GIB, 32768, None,
         gpu_name="NVIDIA B200", gpu_memory_bytes=180 * GIB),
    Case("gpt-oss-20b_h200_10g_32k_default", "gpt-oss-20b", 10 * GIB, 32768, None,
         gpu_name="NVIDIA H200", gpu_memory_bytes=141 * GIB),
]


def layer_name(i: int) -> str:
    return f"model.layers.{i}.self_attn.attn"


def layer_index(name: str) -> int:
    return int(name.split(".")[2])


class _Card:
    """Stands in for vLLM's device query while EngineArgs reads its batch defaults."""

    def __init__(self, platform, name: str, memory: int):
        self.platform = platform
        self.values = {
            "get_device_total_memory": lambda *a, **k: memory,
            "get_device_name": lambda *a, **k: name,
            "is_device_capability": lambda *a, **k: False,  # not a GB10 (cc 12.1)
            "is_tpu": lambda *a, **k: False,
            "is_cpu": lambda *a, **k: False,
        }

    def __enter__(self):
        for k, v in self.values.items():
            setattr(self.platform, k, v)  # instance attributes shadow the class's methods

    def __exit__(self, *exc):
        for k in self.values:
            delattr(self.platform, k)


def default_max_num_batched_tokens(case: Case, model_config, parallel_config) -> int:
    """vLLM's `vllm serve` default for the case's card (EngineArgs, OPENAI_API_SERVER)."""
    import vllm.engine.arg_utils as au
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    if case.gpu_name is None or case.gpu_memory_bytes is None:
        raise SystemExit(f"{case.name}: a default max_num_batched_tokens needs a card")
    args = EngineArgs(model=model_config.model, max_model_len=case.max_model_len,
                      enable_chunked_prefill=True)
    with _Card(au.current_platform, case.gpu_name, case.gpu_memory_bytes):
        args._set_default_max_num_seqs_and_batched_tokens_args(
            UsageContext.OPENAI_API_SERVER, model_config, parallel_config)
    return int(args.max_num_batched_tokens)


def record_case(case: Case, model_dir: str, release: str) -> dict:
    import torch
    import vllm.logger as vllm_logger
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core import kv_cache_utils as kcu
    from vllm.v1.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        SlidingWindowSpec,
    )

    m = MODELS[case.model]
    model_config = ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="bfloat16",
                               seed=0, max_model_len=case.max_model_len)
    mnbt = case.max_num_batched_tokens
    if mnbt is None:
        probe = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"))
        mnbt = default_max_num_batched_tokens(case, model_config, probe.parallel_config)
    scheduler_config = SchedulerConfig(
        max_num_seqs=256,
        max_num_batched_tokens=mnbt,
        max_model_len=case.max_model_len,
        enable_chunked_prefill=True,
        async_scheduling=case.async_scheduling,
        is_encoder_decoder=False,
    )
    cache_config = CacheConfig(block_size=case.block_size,
                               num_gpu_blocks_override=case.num_gpu_blocks_override)
    vllm_config = VllmConfig(model_config=model_config, scheduler_config=scheduler_config,
                             cache_config=cache_config, device_config=DeviceConfig(device="cpu"))
    # The CPU platform turns async scheduling and the hybrid manager off; the GPU path the goldens
    # stand for keeps what the case asks for. The default hybrid setting is vLLM's GPU rule
    # (config/vllm.py): disabled when the model has chunked local attention.
    sc = vllm_config.scheduler_config
    sc.async_scheduling = case.async_scheduling
    sc.max_num_batched_tokens = mnbt
    disable = case.disable_hybrid_kv_cache_manager
    if disable is None:
        disable = m.attention_chunk_size > 0
    sc.disable_hybrid_kv_cache_manager = disable
    vllm_config.cache_config.block_size = case.block_size
    if vllm_config.model_config.max_model_len != case.max_model_len:
        raise SystemExit(f"{case.name}: max_model_len changed")
    if vllm_config.parallel_config.pipeline_parallel_size != 1:
        raise SystemExit(f"{case.name}: pipeline parallel size is not 1")
    if release == "0.33":
        # The GPU engine: its capacity line says "GPU" (device_type "cuda"); FlashAttention
        # declares no layout, so vLLM's default preference (LBNHC) is resolved before planning.
        vllm_config.device_config.device_type = "cuda"
        vllm_config.cache_config.kv_cache_layout = "LBNHC"

    dtype = torch.float8_e4m3fn if case.kv_cache_dtype == "fp8" else torch.bfloat16
    # attention.py get_kv_cache_spec: a window layer's block is the backend's kernel block;
    # 0.26 takes the smallest (16), 0.33 the largest multiple of 16 within the block size; then
    # unify_kv_cache_spec_page_size scales it to the page of the full layers (same result).
    sw_block = 16 if release == "0.26" else max(16, case.block_size // 16 * 16)
    specs = {}
    for i, kind in enumerate(m.layer_types):
        common = dict(num_kv_heads=m.num_kv_heads, head_size=m.head_dim, dtype=dtype)
        if kind == "sliding":
            specs[layer_name(i)] = SlidingWindowSpec(block_size=sw_block,
                                                     sliding_window=m.sliding_window, **common)
        elif kind == "chunked":
            specs[layer_name(i)] = ChunkedLocalAttentionSpec(
                block_size=case.block_size, attention_chunk_size=m.attention_chunk_size, **common)
        else:
            specs[layer_name(i)] = FullAttentionSpec(block_size=case.block_size, **common)

    captured: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record.getMessage())

    handler = Capture(level=logging.INFO)
    loggers = [kcu.logger]
    if release == "0.33":
        from vllm.v1.core import kv_cache_planning as kcp

        loggers.append(kcp.logger)
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        if release == "0.33":
            lg.setLevel(logging.INFO)  # 0.33's module loggers stay at WARNING otherwise
    vllm_logger._print_info_once.cache_clear()
    error = None
    try:
        if release == "0.26":
            configs = kcu.get_kv_cache_configs(vllm_config, [specs], [case.kv_cache_memory_bytes])
            sched_cfg = configs[0]
        else:
            # EngineCore._initialize_kv_caches (0.33).
            groups = kcp.get_global_kv_cache_groups(vllm_config, [specs])
            configs = kcp.get_kv_cache_configs(vllm_config, [specs],
                                               [case.kv_cache_memory_bytes], groups)
            sched_cfg = kcu.generate_scheduler_kv_cache_config(configs)
            vllm_config.cache_config.block_size = min(
                g.kv_cache_spec.block_size for g in sched_cfg.kv_cache_groups)
            kcu.update_kv_cache_capacity(vllm_config, sched_cfg)
    except ValueError as e:  # vLLM refuses to start
        error = {"type": type(e).__name__, "message": str(e)}
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)

    inputs = {
        "model": case.model,
        "kv_cache_memory_bytes": case.kv_cache_memory_bytes,
        "max_model_len": case.max_model_len,
        "max_num_batched_tokens": case.max_num_batched_tokens,
        "async_scheduling": case.async_scheduling,
        "disable_hybrid_kv_cache_manager": case.disable_hybrid_kv_cache_manager,
        "block_size": case.block_size,
        "kv_cache_dtype": case.kv_cache_dtype,
        "num_gpu_blocks_override": case.num_gpu_blocks_override,
    }
    if case.gpu_name is not None:
        inputs["gpu_name"] = case.gpu_name
        inputs["gpu_memory_bytes"] = case.gpu_memory_bytes
    doc = {"vllm_version": __import__("vllm").__version__, "case": case.name, "inputs": inputs}
    if case.max_num_batched_tokens is None:
        doc["max_num_batched_tokens"] = mnbt  # vLLM's default for the card
    doc["max_in_flight_tokens"] = vllm_config.max_in_flight_tokens
    doc["hybrid_kv_cache_manager_disabled"] = bool(disable)
    if error is not None:
        doc["error"] = error
        doc["log_lines"] = [s for s in captured if "KV cache size" in s]
        return doc

    cfg = configs[0]
    if release == "0.26":
        lines = [s for s in captured if s.startswith(("GPU KV cache size", "Maximum concurrency"))]
        want = 2
    else:
        lines = [s for s in captured if s.startswith("GPU KV cache size")]
        want = 1
    if len(lines) != want:
        raise SystemExit(f"{case.name}: expected the start-up capacity line(s), got {captured!r}")

    groups_out = []
    for g in sched_cfg.kv_cache_groups:
        s = g.kv_cache_spec
        kind = ("sliding_window" if isinstance(s, SlidingWindowSpec) else
                "chunked_local_attention" if isinstance(s, ChunkedLocalAttentionSpec) else
                "full_attention")
        entry = {
            "kind": kind,
            "layer_indices": [layer_index(n) for n in g.layer_names],
            "block_size": s.block_size,
            "page_size_bytes": s.page_size_bytes,
            "sliding_window": getattr(s, "sliding_window", None) if kind != "full_attention" else None,
            "attention_chunk_size": (getattr(s, "attention_chunk_size", None)
                                     if kind == "chunked_local_attention" else None),
            "max_memory_usage_bytes": s.max_memory_usage_bytes(vllm_config),
        }
        if kind != "full_attention":
            entry["max_admission_blocks_per_request"] = s.max_admission_blocks_per_request(
                vllm_config.max_in_flight_tokens, case.max_model_len)
        groups_out.append(entry)
    if release == "0.26":
        tensors = [
            {"size_bytes": t.size, "shared_by": [layer_index(n) for n in t.shared_by]}
            for t in cfg.kv_cache_tensors
        ]
    else:
        tensors = [
            {"size_bytes": t.size, "layers": [layer_index(n) for n in t.layers],
             "layer_stride": t.layer_stride, "block_stride": t.block_stride, "offset": t.offset}
            for t in cfg.kv_cache_tensors
        ]
    doc.update({
        "num_blocks": cfg.num_blocks,
        "kv_cache_groups": groups_out,
        "kv_cache_tensors": tensors,
        "max_concurrency": kcu.get_max_concurrency_for_kv_cache_config(vllm_config, sched_cfg),
        "log_lines": lines,
    })
    return doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path,
                        help="output root; the files go to OUT/<release>/ (0.26 or 0.33)")
    parser.add_argument("--only", "--case", nargs="+", action="extend", dest="only",
                        help="record only these cases")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args()
    if args.list:
        for c in CASES:
            skips = "".join(f" [skipped for {r}: {why}]" for r, why in c.skip.items())
            print(f"{c.name}{skips}")
        return 0
    if args.only:
        unknown = set(args.only) - {c.name for c in CASES}
        if unknown:
            print(f"unknown case(s): {sorted(unknown)}", file=sys.stderr)
            return 2
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
    version, release = installed_release()
    out_dir = args.out / release
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"vLLM {version}: writing {out_dir}", flush=True)
    with tempfile.TemporaryDirectory() as model_dir:
        (Path(model_dir) / "config.json").write_text(json.dumps(HF_CONFIG))
        for case in CASES:
            if args.only and case.name not in args.only:
                continue
            if release in case.skip:
                print(f"{case.name}: skipped for vLLM {release}: {case.skip[release]}")
                continue
            golden = record_case(case, model_dir, release)
            path = out_dir / f"{case.name}.json"
            path.write_text(json.dumps(golden, indent=1) + "\n")
            if "error" in golden:
                print(f"{case.name}: {golden['error']['type']}: {golden['error']['message'][:160]}")
            else:
                print(f"{case.name}: num_blocks {golden['num_blocks']}, {golden['log_lines']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
