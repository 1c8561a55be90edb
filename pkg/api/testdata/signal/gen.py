#!/usr/bin/python3
"""Expected answers of the time-aware analytics (API.md §20: twa, integral, coverage,
increase; method, max_gap; E8 fill, fill_limit, extend), computed in float64 by numpy
and, for the fill, by pandas (Series.ffill(limit), interpolate(method="time", limit,
limit_area="inside"), fillna(0)). Never from the Go code. Run from the repository root
with Debian's python3 (python3-pandas 1.5.3):

    /usr/bin/python3 pkg/api/testdata/signal/gen.py

It writes fixtures.json beside this script: the points of each variable and the cases
(request bodies with variable names instead of ids, and expected results), read by
signal_test.go. Deterministic: a fixed seed.

The oracle follows §20 literally: the signal lives between consecutive values of the
whole history (so the values just outside [start, end] shape the edges), an interval
longer than max_gap is a gap, every duration is an integer difference of milliseconds,
and E8 buckets are split at their edges (local midnights for D, W and M).
"""
import bisect
import datetime as dt
import json
import os
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

RNG = np.random.default_rng(20261127)
MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000
HERE = os.path.dirname(os.path.abspath(__file__))


def ms(iso):
    return int(pd.Timestamp(iso).value // 1_000_000)


# Two stretches of data around Europe/Berlin's DST changes of 2026 (29 March, 25
# October), with a long silence between them.
SPANS = [(ms("2026-03-26T00:00Z"), ms("2026-04-02T00:00Z")), (ms("2026-10-22T00:00Z"), ms("2026-10-29T00:00Z"))]
ZONES = ["UTC", "Europe/Berlin", "Asia/Kathmandu"]
PERIODS = ["15T", "1H", "5H", "1D", "2D", "W", "M"]
AGGS = ["twa", "integral", "coverage", "increase"]


def irregular(mean_gap, value, holes=0):
    """Points at exponential random intervals (irregular milliseconds) over SPANS, with
    random holes of 1-30 hours."""
    out = []
    for lo, hi in SPANS:
        cut = [(a, a + int(RNG.uniform(1, 30) * HOUR)) for a in RNG.integers(lo, hi, holes)]
        t = lo + int(RNG.integers(0, 600_000))
        while t < hi:
            if not any(a <= t < b for a, b in cut):
                out.append(t)
            t += 1 + int(RNG.exponential(mean_gap))
    return [[t, value()] for t in sorted(set(out))]


def counter(mean_gap):
    """A counter: rising by random steps, restarting from about 0 now and then."""
    pts, v = irregular(mean_gap, lambda: 0.0, holes=3), 0.0
    for p in pts:
        v = float(RNG.uniform(0, 3)) if RNG.random() < 0.04 else v + float(RNG.uniform(0, 5))
        p[1] = round(v, 3)
    return pts


POINTS = {
    "temp": irregular(12 * MINUTE, lambda: float(RNG.uniform(15, 30)), holes=4),
    "sparse": irregular(4 * HOUR, lambda: float(RNG.uniform(100, 200))),
    "meter": counter(20 * MINUTE),
    # the property cases' series: random densities, levels and holes
    "p1": irregular(float(RNG.uniform(1, 30)) * MINUTE, lambda: float(RNG.uniform(-5, 40)), holes=6),
    "p2": irregular(float(RNG.uniform(30, 300)) * MINUTE, lambda: float(RNG.uniform(1e3, 1e4)), holes=2),
    "p3": counter(float(RNG.uniform(5, 60)) * MINUTE),
}


def arrays(name):
    pts = POINTS[name]
    return np.array([p[0] for p in pts], dtype=np.int64), np.array([p[1] for p in pts], dtype=np.float64)


def midnight(d, zone):
    """The instant (ms) of local midnight of date d in zone."""
    return int(dt.datetime(d.year, d.month, d.day, tzinfo=ZoneInfo(zone)).timestamp() * 1000)


def local_date(t, zone):
    return dt.datetime.fromtimestamp(t / 1000, ZoneInfo(zone)).date()


def grid(period, zone, origin_ms, lo, hi):
    """The buckets holding [lo, hi]: (edges, labels), edges[i] to edges[i+1] being
    bucket i. origin_ms: an instant of the day the nT/nH/nD grid starts at."""
    n, unit = (int(period[:-1] or 1), period[-1]) if period[-1] in "THD" else (1, period)
    day0 = local_date(origin_ms, zone)
    if unit in "TH":
        width = n * (MINUTE if unit == "T" else HOUR)
        o = midnight(day0, zone)
        k0, k1 = (lo - o) // width, (hi - o) // width
        edges = [o + k * width for k in range(k0, k1 + 2)]
        return edges, edges[:-1]
    if unit == "D":
        first = day0 + dt.timedelta(days=(local_date(lo, zone) - day0).days // n * n)
        keys = [first]
        while midnight(keys[-1], zone) <= hi:
            keys.append(keys[-1] + dt.timedelta(days=n))
        edges = [midnight(k, zone) for k in keys]
        return edges, edges[:-1]
    if unit == "W":
        d = local_date(lo, zone)
        keys = [d - dt.timedelta(days=d.weekday())]
        while midnight(keys[-1], zone) <= hi:
            keys.append(keys[-1] + dt.timedelta(days=7))
        return [midnight(k, zone) for k in keys], [midnight(k + dt.timedelta(days=6), zone) for k in keys[:-1]]
    d = local_date(lo, zone)
    keys = [d.replace(day=1)]
    while midnight(keys[-1], zone) <= hi:
        k = keys[-1]
        keys.append(k.replace(year=k.year + k.month // 12, month=k.month % 12 + 1))
    return [midnight(k, zone) for k in keys], [midnight(k - dt.timedelta(days=1), zone) for k in keys[1:]]


def measures(name, lo, hi, linear, max_gap, edges):
    """Per bucket: coverage (ms), area (value·ms) of the signal inside [lo, hi]."""
    ts, vs = arrays(name)
    nb = len(edges) - 1
    cov, area = np.zeros(nb, dtype=np.int64), np.zeros(nb, dtype=np.float64)
    for i in range(len(ts) - 1):
        t, t1, v, v1 = int(ts[i]), int(ts[i + 1]), vs[i], vs[i + 1]
        if max_gap is not None and float(t1 - t) > max_gap * 1000:
            continue
        l, r = max(t, lo), min(t1, hi)
        if r <= l:
            continue
        j = bisect.bisect_right(edges, l) - 1
        while j < nb and edges[j] < r:
            a, b = max(l, edges[j]), min(r, edges[j + 1])
            if b > a:
                cov[j] += b - a
                if linear:
                    ya = v + (v1 - v) * np.float64(a - t) / np.float64(t1 - t)
                    yb = v + (v1 - v) * np.float64(b - t) / np.float64(t1 - t)
                    area[j] += (ya + yb) / 2 * np.float64(b - a)
                else:
                    area[j] += v * np.float64(b - a)
            j += 1
    return cov, area


def increases(name, lo, hi, edges):
    """Per bucket: the number of values in [lo, hi] and the sum of their contributions."""
    ts, vs = arrays(name)
    nb = len(edges) - 1
    nv, inc = np.zeros(nb, dtype=np.int64), np.zeros(nb, dtype=np.float64)
    for i in range(len(ts)):
        if not lo <= ts[i] <= hi:
            continue
        j = bisect.bisect_right(edges, int(ts[i])) - 1
        nv[j] += 1
        if i > 0:
            inc[j] += vs[i] - vs[i - 1] if vs[i] >= vs[i - 1] else vs[i]
    return nv, inc


def value(agg, cov, area, nv, inc):
    """The aggregation of one bucket's measures (None: null)."""
    if agg == "twa":
        return float(area / np.float64(cov)) if cov > 0 else None
    if agg == "integral":
        return float(area / 1000) if cov > 0 else None
    if agg == "coverage":
        return float(np.float64(cov) / 1000)
    return float(inc) if nv > 0 else None


def one_bucket(name, body):
    """E7/E9: the range as one bucket: (cov, area, nv, inc, latest value's ts or None)."""
    lo, hi = body["start"], body["end"]
    cov, area = measures(name, lo, hi, body.get("method") == "linear", body.get("max_gap"), [lo, hi])
    nv, inc = increases(name, lo, hi, [lo, hi + 1])
    ts, _ = arrays(name)
    inside = ts[(ts >= lo) & (ts <= hi)]
    return int(cov[0]), area[0], int(nv[0]), inc[0], (int(inside[-1]) if len(inside) else None)


def statistics(body):
    out = []
    for name in body["variables"]:
        cov, area, nv, inc, _ = one_bucket(name, body)
        if cov == 0 and nv == 0:
            out.append({})
            continue
        ts, vs = arrays(name)
        inside = vs[(ts >= body["start"]) & (ts <= body["end"])]
        mean = float(np.mean(inside)) if len(inside) else None
        out.append({a: mean if a == "mean" else value(a, cov, area, nv, inc) for a in body["aggregations"]})
    return out


def aggregation(body):
    agg, rows = body["aggregation"], []
    for name in body["variables"]:
        cov, area, nv, inc, last = one_bucket(name, body)
        rows.append((cov, area, nv, inc, last))
    if body.get("join_dataframes"):
        live = [r for r in rows if r[0] > 0 or r[2] > 0]
        if not live:
            return []
        cov, area = sum(r[0] for r in live), np.sum([r[1] for r in live])
        nv, inc = sum(r[2] for r in live), np.sum([r[3] for r in live])
        lasts = [r[4] for r in live if r[4] is not None]
        return [[max(lasts) if lasts else body["start"], value(agg, cov, area, nv, inc)]]
    out = []
    for cov, area, nv, inc, last in rows:
        live = cov > 0 or nv > 0
        out.append([[last if last is not None else body["start"], value(agg, cov, area, nv, inc)]] if live else [])
    return out


def series_values(name, body, edges):
    """One variable's bucket values over the grid, and which buckets are non-empty."""
    agg, lo, hi = body["aggregation"], body["start"], body["end"]
    if agg == "mean":  # E8's own mean, for its fill
        ts, vs = arrays(name)
        keep = (ts >= lo) & (ts <= hi)
        idx = np.searchsorted(edges, ts[keep], side="right") - 1
        n, total = np.bincount(idx, minlength=len(edges) - 1), np.bincount(idx, vs[keep], minlength=len(edges) - 1)
        return [float(total[i] / n[i]) if n[i] else None for i in range(len(n))], n > 0
    if agg == "increase":
        nv, inc = increases(name, lo, hi, edges)
        return [value(agg, 0, 0, nv[i], inc[i]) for i in range(len(nv))], nv > 0
    cov, area = measures(name, lo, hi, body.get("method") == "linear", body.get("max_gap"), edges)
    return [value(agg, cov[i], area[i], 0, 0) for i in range(len(cov))], cov > 0


def fill(vals, labels, body, seed):
    """pandas' fill over one series (labels ascending)."""
    how, limit = body.get("fill", "none"), body.get("fill_limit")
    s = pd.Series([np.nan if v is None else v for v in vals], dtype="float64",
                  index=pd.to_datetime(labels, unit="ms", utc=True))
    if how == "zero":
        s = s.fillna(0)
    elif how == "previous":
        if seed is not None:
            head = pd.Series([seed], index=[s.index[0] - pd.Timedelta(milliseconds=1)])
            s = pd.concat([head, s]).ffill(limit=limit).iloc[1:]
        else:
            s = s.ffill(limit=limit)
    elif how == "linear":
        s = s.interpolate(method="time", limit=limit, limit_area="inside")
    return [None if np.isnan(v) else float(v) for v in s.to_numpy()]


def resample(body):
    zone, lo, hi, agg = body.get("tz", "UTC"), body["start"], body["end"], body["aggregation"]
    origin = lo
    if agg in ("increase", "mean"):  # E8's grid: the earliest value in range of the variables
        firsts = [t for n in body["variables"] for t in arrays(n)[0] if lo <= t <= hi]
        if not firsts:
            return [[] for _ in body["variables"]]
        origin = min(firsts)
    edges, labels = grid(body["period"], zone, origin, lo, hi)
    out = []
    for name in body["variables"]:
        vals, live = series_values(name, body, edges)
        idx = np.nonzero(live)[0]
        if body.get("extend"):
            a, b = 0, len(vals) - 1
        elif len(idx) == 0:
            out.append([])
            continue
        else:
            a, b = idx[0], idx[-1]
        ts, vs = arrays(name)
        before = vs[ts < lo]
        seed = float(before[-1]) if body.get("extend") and len(before) else None
        filled = fill(vals[a:b + 1], labels[a:b + 1], body, seed)
        out.append([[labels[i], filled[i - a]] for i in range(b, a - 1, -1)])
    return out


def random_range(min_h, max_h):
    lo, hi = SPANS[int(RNG.integers(0, 2))]
    a = int(RNG.integers(lo - 6 * HOUR, hi - min_h * HOUR))
    return a, a + int(RNG.uniform(min_h, max_h) * HOUR)


def cases():
    out = {"statistics": [], "resample": [], "aggregation": []}
    for zone in ZONES:
        for agg in AGGS:
            for method in ["locf", "linear"]:
                for gap in [None, 2700]:
                    start, end = random_range(20, 150)
                    period = PERIODS[int(RNG.integers(0, len(PERIODS)))]
                    body = {"variables": ["temp", "sparse", "meter"], "aggregation": agg, "period": period, "tz": zone,
                            "start": start, "end": end, "method": method}
                    if gap is not None:
                        body["max_gap"] = gap
                    name = f"{zone} {agg} {method} gap={gap} {period}"
                    out["resample"].append({"name": name, "body": body, "expected": resample(body)})
                    e9 = {k: v for k, v in body.items() if k not in ("period", "tz")}
                    out["aggregation"].append({"name": name, "body": e9, "expected": aggregation(e9)})
                    out["aggregation"].append({"name": name + " join", "body": dict(e9, join_dataframes=True),
                                               "expected": aggregation(dict(e9, join_dataframes=True))})
        for method in ["locf", "linear"]:
            for gap in [None, 1800]:
                start, end = random_range(2, 170)
                body = {"variables": ["temp", "sparse", "meter"], "aggregations": AGGS + ["mean"],
                        "start": start, "end": end, "method": method}
                if gap is not None:
                    body["max_gap"] = gap
                out["statistics"].append({"name": f"{zone} {method} gap={gap}", "body": body,
                                          "expected": statistics(body)})
    out["resample"] += fill_cases()
    return out


def property_cases(count):
    """Random requests over the random series p1-p3: endpoint, aggregation, method,
    max_gap, period, zone, range (from minutes to weeks) and, for E8, fill."""
    out = []
    for i in range(count):
        names = [str(n) for n in RNG.choice(["p1", "p2", "p3"], size=int(RNG.integers(1, 4)), replace=False)]
        agg, zone = AGGS[int(RNG.integers(0, 4))], ZONES[int(RNG.integers(0, 3))]
        start, end = random_range(0.1, 200)
        body = {"variables": names, "aggregation": agg, "start": start, "end": end,
                "method": ["locf", "linear"][int(RNG.integers(0, 2))]}
        if RNG.random() < 0.6:
            body["max_gap"] = float(round(RNG.uniform(60, 20_000), 3))
        kind = ["resample", "aggregation", "statistics"][i % 3]
        if kind == "resample":
            body.update(period=PERIODS[int(RNG.integers(0, len(PERIODS)))], tz=zone)
            if RNG.random() < 0.4:
                body.update(fill=["zero", "previous", "linear"][int(RNG.integers(0, 3))], extend=bool(RNG.random() < 0.5))
                if RNG.random() < 0.5:
                    body["fill_limit"] = int(RNG.integers(1, 4))
            expected = resample(body)
        elif kind == "aggregation":
            body["join_dataframes"] = bool(RNG.random() < 0.4)
            expected = aggregation(body)
        else:
            body["aggregations"] = [str(a) for a in RNG.permutation(AGGS)[:int(RNG.integers(1, 5))]]
            del body["aggregation"]
            expected = statistics(body)
        out.append({"name": f"{kind} {i}", "kind": kind, "body": body, "expected": expected})
    return out


def fill_cases():
    """E8 fill: every method, with and without a limit and extend, on the sparse
    variable's 1H twa (many empty buckets) and temp's hourly mean."""
    out = []
    for i, (how, limit, extend) in enumerate([(f, l, e) for f in ["zero", "previous", "linear"]
                                              for l in [None, 2] for e in [False, True]]):
        zone = ZONES[i % len(ZONES)]
        start, end = random_range(30, 90)
        body = {"variables": ["sparse"], "aggregation": "twa", "period": "1H", "tz": zone, "start": start, "end": end,
                "max_gap": 3600, "fill": how, "extend": extend}
        if limit is not None:
            body["fill_limit"] = limit
        out.append({"name": f"fill {how} limit={limit} extend={extend} {zone}", "body": body, "expected": resample(body)})
        mean = dict(body, variables=["temp", "sparse"], aggregation="mean", period="15T")
        del mean["max_gap"]
        out.append({"name": f"fill mean {how} limit={limit} extend={extend} {zone}", "body": mean, "expected": resample(mean)})
    return out


def main():
    fx = {"points": POINTS, **cases(), "property": property_cases(90)}
    with open(os.path.join(HERE, "fixtures.json"), "w") as f:
        json.dump(fx, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
