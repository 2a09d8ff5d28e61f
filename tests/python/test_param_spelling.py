"""Errors from the C++ rooms name parameters as Python keywords (block_size=), where the CLI names
the same parameter as a flag (--block-size); the rest of the message is the CLI's (issue 24)."""

from __future__ import annotations

import pytest

import kvsim
from conftest import BURSTGPT, ROOT, flags, in_python_spelling


def test_plan_names_the_keyword(cli):
    message = cli.error("plan", "--model", "qwen2.5-7b", "--block-size", 0)
    assert message == "--block-size must be in [1, 1048576] (got 0)"
    with pytest.raises(ValueError) as e:
        kvsim.plan(model="qwen2.5-7b", block_size=0)
    assert str(e.value) == "block_size= must be in [1, 1048576] (got 0)"
    assert str(e.value) == in_python_spelling(message, ("--block-size", "block_size="))


def test_sweep_grid_errors_name_the_keyword(cli):
    t = kvsim.read_trace(BURSTGPT)
    message = cli.error("sweep", BURSTGPT, "--model", "qwen2.5-7b", "--block-sizes", "16,16",
                        "--quiet")
    assert message == "--block-sizes: value 16 given twice"
    with pytest.raises(ValueError) as e:
        kvsim.sweep(t, model="qwen2.5-7b", block_sizes=[16, 16])
    assert str(e.value) == in_python_spelling(message, ("--block-sizes", "block_sizes="))
    with pytest.raises(ValueError, match=r"^block_sizes=: values must be > 0, got 0$"):
        kvsim.sweep(t, model="qwen2.5-7b", block_sizes=[16, 0])


@pytest.mark.parametrize("kw, spelled", [
    # A parameter with the value given: --step-time 'x' / step_time='x'.
    (dict(step_time="fixed:x"), [("--step-time 'fixed:x'", "step_time='fixed:x'")]),
    # Boolean settings: --async-scheduling / async_scheduling=True, --no-... / ...=False.
    (dict(async_scheduling=True, preemption_mode="swap"),
     [("--no-async-scheduling", "async_scheduling=False"),
      ("--async-scheduling", "async_scheduling=True"),
      ("--preemption-mode swap", "preemption_mode=swap")]),
])
def test_replay_values_and_flags_are_spelled_as_keywords(cli, kw, spelled):
    message = cli.error("replay", BURSTGPT, "--model", "qwen2.5-7b", *flags(**kw), "--no-progress")
    with pytest.raises(ValueError) as e:
        kvsim.replay(kvsim.read_trace(BURSTGPT), model="qwen2.5-7b", **kw)
    assert str(e.value) == in_python_spelling(message, *spelled)


def test_trace_error_names_the_keyword(cli):
    path = ROOT / "README.md"  # no trace layout
    message = cli.error("replay", path, "--model", "qwen2.5-7b", "--no-progress")
    with pytest.raises(kvsim.TraceError) as e:
        kvsim.read_trace(path)
    assert str(e.value) == in_python_spelling(message, ("use --format)", "use format=)"))
    assert e.value.field == "header"
