#!/usr/bin/env python3
"""Fit the roofline's per-card defaults on the 16 public H100 runs, and leave-one-run-out.

The shipped `--step-time roofline` on h100-80g is the v1 roofline (lm_head=1, cuda_graphs=1,
allreduce=1) with five engine constants and one client-side constant fitted here:

  engine: 1/mbu, overhead_ms, seq_us, allreduce_hop_us  (the step time is linear in each of
          these, up to the max(compute, memory))
  client: queue_ms (added to TTFT and E2E, never to the engine's clock)

mfu stays at v0's 0.5 (near BLIS's published H100 prefill utilisation, 0.45): these runs do not
identify it. After the first 100 requests every prompt is a prefix-cache hit, so a request's
prefill is under 16 tokens and compute never bounds a step; fitted freely (--fit-mfu) it
wandered over 0.49-0.87 between folds for a loss change under 1 %, and shipping 0.67 would
have made every long uncached prompt (e.g. the Azure traces) ~25 % faster on no evidence.

Method (the same for the all-runs fit and for every leave-one-run-out fold):
  * data: every comparable stage (validate.py: under 1 % client timeouts) of the training runs;
    per stage the mean, p50 and p90 of TTFT, TPOT and E2E; residual r = ln(predicted/measured);
  * loss: Cauchy on r with scale 0.1 (sum of ln(1 + (r/0.1)^2)): its pull falls off beyond
    10 %, so a stage the model cannot follow (CodeLlama-34B reasoning: 120 s of queueing,
    predicted 7-45 s) does not drag the rest, as it does under least squares or soft-L1;
  * queue_ms: for given engine constants, the exact 1-D minimiser of the loss (golden section
    on [0, 100] ms; it shifts TTFT and E2E only, no replay needed);
  * engine constants: a chord Gauss-Newton (Levenberg-Marquardt damped, iteratively reweighted
    for the Cauchy loss) whose Jacobian is taken once, by forward differences at the v0 constants
    (mfu 0.5, mbu 0.8, overhead 1 ms, seq 0 us, hop 0 us), from replays of every run; each
    iteration replays the training runs at the candidate, accepts it if the loss falls, else
    halves the step (at most 4 tries), --iterations iterations (default 4). Bounds: mbu in
    [0.05, 1], overhead, seq, hop >= 0; mfu fixed at 0.5 (above).
  * a fold uses only its training runs' rows of the shared Jacobian and its own replays; the
    held-out run's measurements never enter its fit. A fold whose held-out run has no comparable
    stage (the three overloaded `reasoning` runs) is the all-runs fit.
  * constants are rounded to 3 significant digits (what is shipped / replayed).

Writes --out (JSON: the all-runs constants, the --step-time spec of each fold, losses, wall
time). Usage:
  python3 tools/latency_validation/fit_roofline.py --out tools/latency_validation/roofline_fit.json
"""

import argparse
import concurrent.futures
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import validate  # noqa: E402
from located import RunError  # noqa: E402
from stats import METRICS, STATS  # noqa: E402

NAMES = ["inv_mfu", "inv_mbu", "overhead_ms", "seq_us", "allreduce_hop_us"]
START = [2.0, 1.25, 1.0, 0.0, 0.0]
DELTA = [0.2, 0.0625, 0.5, 20.0, 3.0]  # forward-difference steps
LOWER = [1.0, 1.0, 0.0, 0.0, 0.0]
UPPER = [20.0, 20.0, 50.0, 1000.0, 100.0]
FREE = [False, True, True, True, True]  # which of NAMES are fitted (--fit-mfu: all)
SCALE = 0.1  # soft-L1 scale on log residuals
TERMS = "lm_head=1,cuda_graphs=1,allreduce=1"


def sig3(x):
    return float(f"{x:.3g}") if x != 0 else 0.0


def constants(theta):
    """Rounded, as shipped: {mfu, mbu, overhead_ms, seq_us, allreduce_hop_us}."""
    return {"mfu": sig3(1.0 / theta[0]), "mbu": sig3(1.0 / theta[1]),
            "overhead_ms": sig3(theta[2]), "seq_us": sig3(theta[3]),
            "allreduce_hop_us": sig3(theta[4])}


def spec(c, queue_ms=0.0):
    return (f"roofline:v0,{TERMS},mfu={c['mfu']:g},mbu={c['mbu']:g},"
            f"overhead_ms={c['overhead_ms']:g},seq_us={c['seq_us']:g},"
            f"allreduce_hop_us={c['allreduce_hop_us']:g},queue_ms={queue_ms:g}")


class Replayer:
    def __init__(self, runs_dir, kvsim, seed, jobs):
        self.runs_dir, self.kvsim, self.seed, self.jobs = runs_dir, kvsim, seed, jobs
        self.cache = {}
        self.replays = 0

    def rows(self, runs, c):
        """{run: validate rows} for the rounded constants c (queue 0), cached."""
        key = tuple(sorted(c.items()))
        todo = [r for r in runs if (r, key) not in self.cache]

        def one(run):
            return run, validate.validate_run(self.runs_dir, run, self.kvsim, spec(c),
                                              self.seed)[0]

        with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
            for run, rs in pool.map(one, todo):
                self.cache[(run, key)] = rs
                self.replays += 1
        return {r: self.cache[(r, key)] for r in runs}


def observations(rows_by_run, runs):
    """[(run, stage, metric, stat, predicted_s, measured_s)] over comparable stages."""
    out = []
    for run in runs:
        for row in rows_by_run[run]:
            if row["overloaded"]:
                continue
            for m in METRICS:
                for s in STATS:
                    p, q = row["predicted"][m][s], row["measured"][m][s]
                    if math.isfinite(p) and math.isfinite(q) and p > 0 and q > 0:
                        out.append((run, row["stage"], m, s, p, q))
    return out


def shifted(obs, q_s):
    return [math.log((p + (q_s if m != "tpot" else 0.0)) / meas)
            for _, _, m, _, p, meas in obs]


def loss_of(res):
    return sum(math.log1p((r / SCALE) ** 2) for r in res)


def best_queue(obs):
    """Golden-section minimiser of the loss in queue_ms over [0, 100] ms; returns ms."""
    lo, hi = 0.0, 100.0
    g = (math.sqrt(5) - 1) / 2
    f = lambda ms: loss_of(shifted(obs, ms * 1e-3))  # noqa: E731
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(60):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = f(b)
    return sig3((lo + hi) / 2)


def solve(a, b):
    """Gaussian elimination with partial pivoting: a x = b (small dense)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-300:
            continue
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    return [m[i][n] / m[i][i] if abs(m[i][i]) > 1e-300 else 0.0 for i in range(n)]


def fit(rep, runs, jac_rows, base_obs_all, iterations, lam=1e-3):
    """The chord fit on `runs`. jac_rows: {param index: rows at the perturbed point}."""
    theta = START[:]
    c = constants(theta)
    obs = observations(rep.rows(runs, c), runs)
    q = best_queue(obs)
    cur = loss_of(shifted(obs, q * 1e-3))
    # Jacobian of the log residuals (engine columns from the shared forward differences,
    # queue column analytic), rows in the order of observations() at the start point.
    base = {o[:4]: o[4] for o in observations(base_obs_all, runs)}
    cols = []
    for i in range(len(NAMES)):
        if not FREE[i]:
            cols.append({})
            continue
        pert = {o[:4]: o[4] for o in observations(jac_rows[i], runs)}
        cols.append({k: math.log(pert[k] / base[k]) / DELTA[i] for k in base if k in pert})
    history = [{"iteration": 0, "constants": c, "queue_ms": q, "loss": cur}]
    for it in range(1, iterations + 1):
        res = shifted(obs, q * 1e-3)
        qcol = [(1.0 / (p + q * 1e-3)) * 1e-3 if m != "tpot" else 0.0
                for _, _, m, _, p, _ in obs]
        jac = [[col.get(o[:4], 0.0) if FREE[i] else 0.0 for o in obs]
               for i, col in enumerate(cols)] + [qcol]
        w = [1.0 / (1.0 + (r / SCALE) ** 2) for r in res]  # Cauchy IRLS weights
        n = len(jac)
        jtj = [[sum(w[k] * jac[i][k] * jac[j][k] for k in range(len(res))) for j in range(n)]
               for i in range(n)]
        jtr = [-sum(w[k] * jac[i][k] * res[k] for k in range(len(res))) for i in range(n)]
        for i in range(n):
            jtj[i][i] *= 1.0 + lam
            jtj[i][i] += 1e-12
        step = solve(jtj, jtr)
        accepted = False
        for _ in range(4):
            cand = [min(UPPER[i], max(LOWER[i], theta[i] + (step[i] if FREE[i] else 0.0)))
                    for i in range(len(NAMES))]
            cc = constants(cand)
            cobs = observations(rep.rows(runs, cc), runs)
            cq = best_queue(cobs)
            cl = loss_of(shifted(cobs, cq * 1e-3))
            if cl < cur:
                theta, c, obs, q, cur, accepted = cand, cc, cobs, cq, cl, True
                break
            step = [s / 2 for s in step]
        history.append({"iteration": it, "constants": c, "queue_ms": q, "loss": cur,
                        "accepted": accepted})
        if not accepted:
            break
    return {"constants": c, "queue_ms": q, "loss": cur, "observations": len(obs),
            "history": history}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    validate.add_common_args(ap)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--no-folds", action="store_true", help="only the all-runs fit")
    ap.add_argument("--fit-mfu", action="store_true", help="fit mfu too (not identified here)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    t0 = time.time()
    try:
        runs = validate.find_runs(a.runs_dir, None)
        rep = Replayer(a.runs_dir, a.kvsim, a.seed, a.jobs)
        base_rows = rep.rows(runs, constants(START))
        if a.fit_mfu:
            FREE[0] = True
        jac_rows = {}
        for i in range(len(NAMES)):
            if not FREE[i]:
                jac_rows[i] = base_rows
                continue
            theta = START[:]
            theta[i] += DELTA[i]
            # Unrounded perturbation: the Jacobian needs the exact step.
            c = {"mfu": 1.0 / theta[0], "mbu": 1.0 / theta[1], "overhead_ms": theta[2],
                 "seq_us": theta[3], "allreduce_hop_us": theta[4]}
            jac_rows[i] = rep.rows(runs, c)
        comparable = [r for r in runs if any(not row["overloaded"] for row in base_rows[r])]
        result = {"method": __doc__.split("Method")[1].split("Writes")[0].strip(),
                  "terms": TERMS, "runs": runs, "fitted_on": comparable,
                  "fitted": [n for n, f in zip(NAMES, FREE) if f] + ["queue_ms"]}
        allfit = fit(rep, comparable, jac_rows, base_rows, a.iterations)
        allfit["spec"] = spec(allfit["constants"], allfit["queue_ms"])
        result["all_runs"] = allfit
        print(f"all runs: {allfit['spec']} loss {allfit['loss']:.2f}", flush=True)
        folds = []
        if not a.no_folds:
            for held in runs:
                train = [r for r in comparable if r != held]
                f = allfit if train == comparable else fit(rep, train, jac_rows, base_rows,
                                                           a.iterations)
                folds.append({"held_out": held, "fitted_on": train, "constants": f["constants"],
                              "queue_ms": f["queue_ms"], "loss": f["loss"],
                              "spec": spec(f["constants"], f["queue_ms"])})
                print(f"fold {held}: {folds[-1]['spec']}", flush=True)
        result["folds"] = folds
        result["replays"] = rep.replays
        result["wall_s"] = round(time.time() - t0, 1)
        result["kvsim_commit"] = validate.git_commit()
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")
    except RunError as e:
        print(f"fit_roofline: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
