"""Refusals and warnings that name what went wrong (issue 23, section 3), as the CLI's."""

from __future__ import annotations

import pytest

import kvsim

from conftest import ROOT

TRACE = ROOT / "tests/data/traces/azure_head.csv.gz"


def test_all_rejected_warning_names_admission_reasons():
    trace = kvsim.read_trace(TRACE)
    with pytest.warns(RuntimeWarning, match=r"all 4 requests were rejected "
                                            r"\(4 admission_token_limit\)"):
        kvsim.replay(trace, model="qwen2.5-7b", replicas=2, admission_max_waiting_tokens=1)


def test_router_knobs_need_their_router():
    trace = kvsim.read_trace(TRACE)
    with pytest.raises(ValueError, match="affinity_load_factor= needs router=prefix-affinity"):
        kvsim.replay(trace, model="qwen2.5-7b", replicas=2, affinity_load_factor=2.0)
