"""kvsim.calibrate: the CLI's `kvsim calibrate` from Python (docs/calibrate.md).

Measurements made by kvsim itself with the shipped coefficients are fitted back: the written
calibration is what the CLI writes from the same inputs, it replays, and bad input raises with
the file and field named.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import kvsim

from conftest import ROOT

SHIPPED = ROOT / "calibration" / "physics" / "h100-vllm-blis.json"
ENGINE = dict(model="llama-3.1-8b", gpu="h100-80g", max_num_batched_tokens=2048, max_num_seqs=128,
              max_model_len=4096)

pytestmark = pytest.mark.skipif(not hasattr(kvsim._kvsim, "calibrate"),
                                reason="built without NLopt: no calibrate")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    d = tmp_path_factory.mktemp("calibrate")
    trace = d / "t.jsonl"
    lines = [json.dumps({"kvsim_trace": 1, "records": 400})]
    for i in range(400):
        lines.append(json.dumps({"arrival_s": i * 0.08, "input_tokens": 100 + (i * 37) % 1400,
                                 "output_tokens": 10 + (i * 53) % 190}))
    trace.write_text("\n".join(lines) + "\n")
    r = kvsim.replay(str(trace), step_time=f"physics:{SHIPPED}", requests=True, **ENGINE)
    table = r.requests[["arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s"]]
    path = d / "measured.csv"
    table.to_csv(path, index=False)
    return d, path, trace


def test_fits_what_kvsim_measured_and_writes_a_calibration(measured):
    d, path, trace = measured
    out = d / "cal.json"
    res = kvsim.calibrate(path, output=out, fit=["beta2b", "alpha0"], start=SHIPPED, **ENGINE)
    cal = res["calibration"]
    assert cal["format"] == "kvsim-physics/1"
    assert cal["fit"]["fitted"] == ["beta2b", "alpha0"]
    assert cal["fit"]["fit_error_pct"] < 1.0
    assert abs(cal["beta"][9] - 1.94710771) < 0.1  # the data were made with the start
    assert json.loads(out.read_text()) == cal
    assert len(res["fit_errors"]) == 18  # 9 statistics x 2 halves
    assert set(res["fit_errors"].columns) >= {"stat", "measured_s", "predicted_s", "error_pct"}
    assert len(res["cv_errors"]) == 18
    # The written file is a step-time model.
    again = kvsim.replay(str(trace), step_time=f"physics:{out}", **ENGINE)
    assert again["finished"] == 400


def test_same_calibration_as_the_cli(measured):
    d, path, _ = measured
    cli = os.environ.get("KVSIM_CLI")
    if not cli:
        pytest.skip("KVSIM_CLI not set")
    out = d / "cli.json"
    subprocess.run([cli, "calibrate", str(path), "--model", "llama-3.1-8b", "--gpu", "h100-80g",
                    "--max-num-batched-tokens", "2048", "--max-num-seqs", "128",
                    "--max-model-len", "4096", "--fit", "beta2b,alpha0", "--start", str(SHIPPED),
                    "--max-evaluations", "60", "--no-cross-validation", "-o", str(out)],
                   check=True, capture_output=True)
    py = kvsim.calibrate(path, fit="beta2b,alpha0", start=SHIPPED, max_evaluations=60,
                         cross_validation=False, **ENGINE)["calibration"]
    assert json.loads(out.read_text()) == py


def test_bad_input_names_file_and_field(measured, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,10,5,0.1,1\n1,10,x,0.1,1\n")
    with pytest.raises(Exception, match=r"bad\.csv:3, field output_tokens"):
        kvsim.calibrate(bad, **ENGINE)
    _, path, _ = measured
    with pytest.raises(Exception, match=r"unknown coefficient 'beta99'"):
        kvsim.calibrate(path, fit="beta99", **ENGINE)
    with pytest.raises(TypeError, match="max_evaluations must be an integer"):
        kvsim.calibrate(path, max_evaluations=1.5, **ENGINE)
    with pytest.raises(ValueError, match="refusing to overwrite an input"):
        kvsim.calibrate(path, output=path, **ENGINE)
