"""Shared fixtures: the repository's traces and the kvsim CLI the Python results are compared with.

ctest (python/CMakeLists.txt) sets KVSIM_CLI to the kvsim executable of the same build and
PYTHONPATH to the build's package; run by hand, set KVSIM_CLI to compare with a CLI build.
"""

from __future__ import annotations

import json
import os
import re
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(os.environ.get("KVSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
TRACES = ROOT / "traces"
AZURE_CONV = TRACES / "AzureLLMInferenceTrace_conv.csv"
AZURE_CODE = TRACES / "AzureLLMInferenceTrace_code.csv"
MOONCAKE = TRACES / "conversation_trace.jsonl"
BURSTGPT = TRACES / "BurstGPT_1.head400.csv"
VIDUR = TRACES / "splitwise_conv.csv"
SHAREGPT = TRACES / "sharegpt_8k_filtered_stats_llama2_tokenizer.csv"

# The lesson's plan (README quick start).
LESSON = dict(model="qwen2.5-7b", gpu="rtx4090", gpu_memory_utilization=0.90, overhead_gib=1.6,
              weights_gib=5.5, kv_cache_dtype="fp8", max_model_len=8192)


def flags(**kwargs) -> list:
    """Python keyword arguments as CLI flags (True -> --name, False -> --no-name)."""
    out = []
    for k, v in kwargs.items():
        name = "--" + k.replace("_", "-")
        if v is True:
            out.append(name)
        elif v is False:
            out.append("--no-" + k.replace("_", "-"))
        else:
            out += [name, str(v)]
    return out


class Cli:
    def __init__(self, path: str) -> None:
        self.path = path

    def run(self, *args, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([self.path, *map(str, args)], capture_output=True, text=True,
                           cwd=ROOT, timeout=600)
        if check and p.returncode != 0:
            raise AssertionError(f"kvsim {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}")
        return p

    def json(self, *args) -> dict:
        return json.loads(self.run(*args).stdout)

    def error(self, *args) -> str:
        """The one-line message of a failing command (after 'kvsim: error: ')."""
        p = self.run(*args, check=False)
        assert p.returncode != 0, p.stdout
        lines = [l for l in p.stderr.splitlines() if l.startswith("kvsim: error: ")]
        assert len(lines) == 1, p.stderr
        return lines[0][len("kvsim: error: "):]


def in_python_spelling(cli_message: str, *spellings: tuple[str, str]) -> str:
    """The CLI's message as Python words it: the same text, each parameter the CLI names as a flag
    ("--block-size 0", "--gpus") named as a keyword ("block_size=0", "gpus=")."""
    out = cli_message
    for cli_text, python_text in spellings:
        assert cli_text in out, (cli_text, out)
        out = out.replace(cli_text, python_text)
    assert "--" not in out, out
    return out


def in_cli_spelling(python_text: str) -> str:
    """Text the run room wrote for Python (a size result's reason) as the CLI writes it: each
    parameter named as a keyword ("max_replicas=8", "tensor_parallel_size=") named as a flag
    ("--max-replicas 8", "--tensor-parallel-size"). Only the run room's parameter ids are
    rewritten, so a candidate's "tp=2 kv=fp8" stays as it is."""
    from kvsim import _kvsim, _options

    ids = sorted(set(_kvsim.PARAMETERS) | set(_options._LOCAL), key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, ids)) + r")=(\S*)")

    def flag(m: re.Match) -> str:
        name = "--" + m.group(1).replace("_", "-")
        return f"{name} {m.group(2)}" if m.group(2) else name

    return pattern.sub(flag, python_text)


@pytest.fixture(scope="session")
def cli() -> Cli:
    path = os.environ.get("KVSIM_CLI")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("KVSIM_CLI (the kvsim executable to compare with) is not set")
    return Cli(path)


def without_wall(d: dict) -> dict:
    """A replay summary without its one non-deterministic key."""
    return {k: v for k, v in d.items() if k != "wall_seconds"}
