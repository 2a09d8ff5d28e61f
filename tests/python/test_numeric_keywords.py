"""Every numeric keyword of the public functions follows the CLI's number rule, found by walking
their signatures (a keyword added later is covered without editing this test): integers are
64-bit and never clamped (2**63 is refused naming the keyword and the value, as the CLI refuses
--max-requests 9223372036854775808), numbers are finite, and text is not a number."""

from __future__ import annotations

import inspect
import math
import re

import pytest

import kvsim

from conftest import ROOT

TRACE = ROOT / "tests/data/traces/azure_head.csv.gz"
SIZE_REQUIRED = dict(gpus="l40s", tp=1, slo_ttft_p99=1.0, slo_tpot_p99=1.0)


def _calls():
    """(function name, callable taking the keywords under test, its signature)."""
    trace = kvsim.read_trace(TRACE, max_requests=4)
    model = dict(model="qwen2.5-7b")
    yield "plan", lambda **kw: kvsim.plan(**{**model, **kw}), inspect.signature(kvsim.plan)
    yield ("read_trace", lambda **kw: kvsim.read_trace(TRACE, **kw),
           inspect.signature(kvsim.read_trace))
    yield ("replay", lambda **kw: kvsim.replay(trace, **{**model, **kw}),
           inspect.signature(kvsim.replay))
    yield ("sweep", lambda **kw: kvsim.sweep(trace, **{**model, **kw}),
           inspect.signature(kvsim.sweep))
    yield ("size", lambda **kw: kvsim.size(trace, **{**model, **SIZE_REQUIRED, **kw}),
           inspect.signature(kvsim.size))


def _kind(annotation: str) -> str | None:
    """'int', 'float' or None from a keyword's annotation (a string: postponed annotations)."""
    if "Mapping" in annotation:
        return None  # gpu_price: checked below
    if re.search(r"\bint\b", annotation):
        return "int"
    if re.search(r"\bfloat\b", annotation):
        return "float"
    return None


def _numeric_keywords():
    for fn, call, sig in _calls():
        for name, p in sig.parameters.items():
            if p.kind is not inspect.Parameter.KEYWORD_ONLY:
                continue
            annotation = str(p.annotation)
            kind = _kind(annotation)
            if kind:
                yield fn, call, name, kind, annotation.startswith("Sequence")  # a list only


BAD_INTS = [(2**63, ValueError, "out of range"), (2**64, ValueError, "out of range"),
            (-2**63 - 1, ValueError, "out of range"), (10**30, ValueError, "out of range"),
            ("0x10", TypeError, "integer"), (" 16", TypeError, "integer"),
            (1.5, TypeError, "integer"), (True, TypeError, "integer")]
BAD_FLOATS = [(math.inf, ValueError, "finite"), (-math.inf, ValueError, "finite"),
              (math.nan, ValueError, "finite"), ("0x1p4", TypeError, "number"),
              ("1.5", TypeError, "number"), (False, TypeError, "number")]


def test_the_walk_finds_the_numeric_keywords():
    found = {(fn, name) for fn, _, name, _, _ in _numeric_keywords()}
    assert len(found) > 80
    for expected in [("read_trace", "max_requests"), ("read_trace", "time_scale"),
                     ("replay", "affinity_load_factor"), ("sweep", "block_sizes"),
                     ("sweep", "gpu_memory_utilizations"), ("size", "tp"),
                     ("size", "max_replicas"), ("plan", "kv_cache_memory_bytes")]:
        assert expected in found


@pytest.mark.parametrize("fn,call,name,kind,seq",
                         list(_numeric_keywords()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_bad_numbers_are_refused_naming_the_keyword(fn, call, name, kind, seq):
    for value, error, words in BAD_INTS if kind == "int" else BAD_FLOATS:
        if name in ("seed", "router_seed") and value in (2**63,):
            continue  # seeds are unsigned 64-bit (the CLI's --seed 0 .. 2^64-1)
        arg = [value] if seq else value
        with pytest.raises((TypeError, ValueError)) as e:
            call(**{name: arg})
        msg = str(e.value)
        assert name in msg, (name, value, msg)
        assert e.type is error, (name, value, msg)
        if error is ValueError:
            assert words in msg, (name, value, msg)


def test_int32_settings_out_of_range_are_value_errors_not_bad_cast():
    trace = kvsim.read_trace(TRACE, max_requests=4)
    with pytest.raises(ValueError, match=r"max_num_seqs is out of range .*1099511627776"):
        kvsim.replay(trace, model="qwen2.5-7b", max_num_seqs=2**40)


def test_gpu_price_must_be_finite():
    trace = kvsim.read_trace(TRACE, max_requests=4)
    for usd in (math.inf, math.nan):
        with pytest.raises(ValueError, match="gpu_price"):
            kvsim.size(trace, model="qwen2.5-7b", gpu_price={"l40s": usd}, **SIZE_REQUIRED)
