"""Several step-time models side by side on the 16 real vLLM runs: (a) roofline, (b) BLIS's
shipped physics coefficients, (c) leave-one-run-out calibrations, (d) one calibration on all
runs. Each is replayed and compared per stage exactly as validate.py does (validate_run); this
module merges the rows and computes the medians; report_compare.py writes the page.
Used by loo_calibrate.py (--markdown/--json); the fold files come from its --folds-dir.
"""

import concurrent.futures
import json
import os

import report_compare
import validate
from located import RunError
from stats import METRICS, STATS, median

REPO = validate.REPO
BLIS = "calibration/physics/h100-vllm-blis.json"
ROOFLINE_FIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "roofline_fit.json")
SPEED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "speed.json")


def read_optional(path):
    """A JSON file the page shows when present (fit_roofline.py's fit, speed.py's timings)."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_index(folds_dir):
    path = os.path.join(folds_dir, "folds.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise RunError(f"{path}:1: field 'file': {e.strerror} (run loo_calibrate.py without "
                       "--only-table first)") from None


def kinds(index):
    """[(key, label, {run: --step-time})]; (d) only when the index has the all-runs fit."""
    fold = {f["held_out"]: "physics:" + f["file"] for f in index["folds"]}
    out = [("a", "roofline (shipped)", {r: "roofline" for r in fold})]
    rfit = read_optional(ROOFLINE_FIT)
    if rfit:
        out.append(("e", "roofline leave one run out",
                    {f["held_out"]: f["spec"] for f in rfit["folds"]}))
    out += [("a0", "roofline:v0 (before)", {r: "roofline:v0" for r in fold}),
            ("b", "BLIS", {r: "physics:" + BLIS for r in fold}),
            ("c", "leave one run out", fold)]
    if "all_runs" in index:
        out.append(("d", "all runs", {r: "physics:" + index["all_runs"]["file"] for r in fold}))
    return out


def sim_flags(row):
    f = []
    if row["stage_overlap"]:
        f.append("did not drain")
    if row["predicted"]["unfinished"]:
        f.append(f"{row['predicted']['unfinished']} unfinished")
    return ", ".join(f)


def run_all(runs_dir, kvsim, ks, seed, jobs=2):
    """{kind: [validate rows]} and {kind: an example command}."""
    tasks = [(k, run, spec) for k, _, specs in ks for run, spec in sorted(specs.items())]

    def one(task):
        k, run, spec = task
        kind, _, path = spec.partition(":")
        if kind == "physics":  # physics:FILE with FILE relative to the repository
            spec = kind + ":" + os.path.join(REPO, path)
        return k, validate.validate_run(runs_dir, run, kvsim, spec, seed)

    rows, example = {}, {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for k, (rs, cmd) in pool.map(one, tasks):
            rows.setdefault(k, []).extend(rs)
            example.setdefault(k, cmd)
    return rows, example


def merge(rows, ks):
    """One row per run-stage: measured once, predicted/error/flags per kind."""
    merged = []
    for i, base in enumerate(rows["a"]):
        m = {key: base[key] for key in ("run", "model", "tp", "stage", "rate", "overloaded",
                                        "measured")}
        m["predicted"], m["error_pct"], m["flags"] = {}, {}, {}
        for k, _, _ in ks:
            r = rows[k][i]
            assert (r["run"], r["stage"]) == (base["run"], base["stage"])
            m["predicted"][k] = r["predicted"]
            m["error_pct"][k] = r["error_pct"]
            m["flags"][k] = sim_flags(r)
        merged.append(m)
    return merged


def family_medians(rows):
    """{model: median |error| of the mean statistics over its comparable stages}."""
    out = {}
    for model in sorted({r["model"] for r in rows}):
        chosen = [r for r in rows if r["model"] == model and not r["overloaded"]]
        out[model] = {"stages": len(chosen)}
        for metric in METRICS:
            key = f"{metric}_mean"
            out[model][key] = median([abs(r["error_pct"][key]) for r in chosen])
    return out


def fold_coefficients(index):
    """Per fold: the fitted coefficients' values, fit error and evaluations from its file."""
    out = []
    entries = list(index["folds"]) + ([dict(index["all_runs"], held_out="all runs")]
                                      if "all_runs" in index else [])
    for f in entries:
        path = os.path.join(REPO, f["file"])
        with open(path, encoding="utf-8") as fh:
            cal = json.load(fh)
        values = {}
        for name in cal["fit"]["fitted"]:
            kind, i = (name[:4], name[4:]) if name.startswith("beta") else (name[:5], name[5:])
            position = {"1a": 0, "2a": 1, "3": 2, "4": 3, "5": 4, "6": 5, "7": 6, "8": 7,
                        "1b": 8, "2b": 9}
            values[name] = (cal["beta"][position[i]] if kind == "beta"
                            else cal["alpha"][int(i)])
        out.append({"held_out": f["held_out"], "file": f["file"], "fitted_on": f["fitted_on"],
                    "values": values, "fit_error_pct": cal["fit"]["fit_error_pct"],
                    "cv_error_pct": cal["fit"].get("cv_error_pct"),
                    "evaluations": cal["fit"]["evaluations"], "wall_s": f["wall_s"]})
    return out


def build(runs_dir, kvsim, folds_dir, seed):
    index = read_index(folds_dir)
    ks = kinds(index)
    rows, example = run_all(runs_dir, kvsim, ks, seed)
    merged = merge(rows, ks)
    return {"kinds": [{"key": k, "label": label} for k, label, _ in ks],
            "seed": seed, "kvsim_commit": validate.git_commit(), "index": index,
            "example_command": example,
            "median_abs_error_pct": {k: validate.medians(rows[k]) for k, _, _ in ks},
            "family_median_abs_error_pct": {k: family_medians(rows[k]) for k, _, _ in ks},
            "folds": fold_coefficients(index), "stages": merged,
            "roofline_fit": read_optional(ROOFLINE_FIT), "speed": read_optional(SPEED)}


def write(runs_dir, kvsim, folds_dir, seed, markdown_path, json_path, command):
    result = build(runs_dir, kvsim, folds_dir, seed)
    result["command"] = command.strip()
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(validate.finite_or_null(result), f, indent=1, sort_keys=True,
                      allow_nan=False)
            f.write("\n")
    if markdown_path:
        with open(markdown_path, "w", encoding="utf-8") as f:
            f.write(report_compare.markdown(result))
    report_compare.print_summary(result)
    return result
