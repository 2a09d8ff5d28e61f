"""Summary statistics as inference-perf computes them, and the error measures of the table."""

import math

METRICS = ["ttft", "tpot", "e2e"]
STATS = ["mean", "p50", "p90"]
HEADLINE = ["ttft_mean", "tpot_mean", "e2e_mean"]


def percentile(values, q):
    """numpy.percentile's default (linear interpolation), which inference-perf's summarize uses."""
    if not values:
        return math.nan
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(values):
    if not values:
        return {k: math.nan for k in STATS}
    return {"mean": sum(values) / len(values), "p50": percentile(values, 50),
            "p90": percentile(values, 90)}


def pct_error(predicted, measured):
    """Signed error of the prediction in percent of the measurement."""
    if not (math.isfinite(predicted) and math.isfinite(measured)) or measured == 0:
        return math.nan
    return 100.0 * (predicted - measured) / measured


def median(values):
    v = [x for x in values if math.isfinite(x)]
    return percentile(v, 50) if v else math.nan
