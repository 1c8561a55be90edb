#!/usr/bin/python3
"""Expected E7 (statistics), E8 (resample) and E9 (aggregation) answers for random
requests, computed by pandas/numpy: the acceptance fixtures of the rollup tiers
(tiers_property_test.go). Whatever tiers the compiler reads, the answers must stay these.

Run from the repository root with Debian's python3 (pandas 1.5.3):

    /usr/bin/python3 pkg/api/testdata/tiers/gen.py

It writes fixtures.json beside this script: the points of each variable, the random
cases (request bodies with variable names instead of ids, expected results) and, as
testdata/parity/gen.py does (whose E8/E9 semantics and tz record it reuses), the tz
rules pandas used, so that the test skips the cases of a zone whose rules differ in the
database. Deterministic: a fixed seed, and the same output for the same tzdata.
"""
import importlib.util
import json
import os

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("parity", os.path.join(HERE, "..", "parity", "gen.py"))
parity = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parity)  # E8/E9 semantics (API.md §8, §9), tz record, rounding

RNG = np.random.default_rng(20261124)
ms = parity.ms
MS = parity.MS
MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000

DATA = (ms("2026-03-01T00:00Z"), ms("2026-11-15T00:00Z"))
ZONES = ["UTC", "Asia/Kathmandu", "Pacific/Chatham", "Australia/Lord_Howe", "America/St_Johns", "Europe/Berlin"]
PERIODS = ["1T", "7T", "15T", "30T", "45T", "1H", "2H", "5H", "1D", "2D", "W", "M"]
WIDTH = {"1T": MINUTE, "7T": 7 * MINUTE, "15T": 15 * MINUTE, "30T": 30 * MINUTE, "45T": 45 * MINUTE,
         "1H": HOUR, "2H": 2 * HOUR, "5H": 5 * HOUR, "1D": DAY, "2D": 2 * DAY, "W": 7 * DAY, "M": 31 * DAY}
E7_AGGS = ["first", "last", "min", "max", "count", "sum", "mean", "std", "p25", "p50", "p75"]
E8_AGGS = parity.AGGS


def irregular(mean_gap_ms, value, holes=(), bursts=0, start=DATA[0], end=DATA[1]):
    """Points at exponential random intervals (irregular milliseconds), none inside
    the [from, to) holes, plus bursts of 20-80 points 0.3-5 s apart."""
    ts, t = [], start + int(RNG.integers(0, 600_000))
    while t < end:
        if not any(a <= t < b for a, b in holes):
            ts.append(t)
        t += 1 + int(RNG.exponential(mean_gap_ms))
    for _ in range(bursts):
        t = int(RNG.integers(start, end))
        for _ in range(int(RNG.integers(20, 80))):
            ts.append(t)
            t += int(RNG.integers(300, 5_000))
    ts = sorted(set(ts))
    return [[t, value()] for t in ts]


def random_holes(count, min_h, max_h, start=DATA[0], end=DATA[1]):
    out = []
    for _ in range(count):
        a = int(RNG.integers(start, end))
        out.append((a, a + int(RNG.uniform(min_h, max_h) * HOUR)))
    return out


def mixed():
    """Both signs; a third of them on a coarse grid (ties), some large."""
    r = RNG.random()
    if r < 0.33:
        return float(RNG.integers(-8, 9)) / 4
    if r < 0.4:
        return float(RNG.uniform(-1e4, 1e4))
    return float(RNG.uniform(-60, 60))


POINTS = {
    # dense and irregular, bursts seconds apart, holes of hours to days
    "a": irregular(40 * MINUTE, mixed, random_holes(25, 2, 60), bursts=40),
    # 1e6 ± 0.01: a sum of squares loses every digit of std here
    "b": irregular(100 * MINUTE, lambda: 1e6 + float(RNG.uniform(-0.01, 0.01)),
                   random_holes(10, 5, 40), bursts=15),
    # small integers (min and max reached many times: the earliest wins), a 3-week hole
    "c": irregular(75 * MINUTE, lambda: float(RNG.integers(-3, 4)),
                   [(ms("2026-07-02T13:00Z"), ms("2026-07-23T09:30Z"))] + random_holes(8, 1, 20), bursts=10),
    # negative, sparse, from June on
    "d": irregular(7 * HOUR, lambda: -float(RNG.exponential(300)), random_holes(5, 24, 120),
                   start=ms("2026-06-10T17:23:11.123Z")),
    "empty": [],
}
SERIES = {n: pd.Series([p[1] for p in pts], index=pd.to_datetime([p[0] for p in pts], unit="ms", utc=True),
                       dtype="float64") for n, pts in POINTS.items()}
VARS = ["a", "b", "c", "d"]


def statistics(body):
    """API.md §7 with numpy: per variable {} when the range is empty, else every
    aggregation; std with ddof=1 (null under 2 values), linear percentiles, min/max at the
    earliest timestamp holding them."""
    out = []
    for n in body["variables"]:
        s = parity.in_range(SERIES[n], body["start"], body["end"])
        if not len(s):
            out.append({})
            continue
        v = s.to_numpy()
        t = [int(x.value // MS) for x in s.index]
        r = {"first": {"value": float(v[0]), "timestamp": t[0]},
             "last": {"value": float(v[-1]), "timestamp": t[-1]},
             "min": {"value": float(v.min()), "timestamp": t[int(np.argmin(v))]},  # first occurrence
             "max": {"value": float(v.max()), "timestamp": t[int(np.argmax(v))]},
             "count": {"value": len(v)},
             "sum": {"value": float(v.sum())},
             "mean": {"value": float(v.mean())},
             "std": {"value": float(np.std(v, ddof=1)) if len(v) > 1 else None}}
        for name, q in (("p25", 25), ("p50", 50), ("p75", 75)):
            r[name] = {"value": float(np.percentile(v, q))}
        out.append(r)
    return out


def edge(t):
    """t, or moved onto (or a millisecond off) a minute, quarter-hour or local midnight."""
    r = RNG.random()
    if r < 0.5:
        return t
    if r < 0.65:
        t = t // MINUTE * MINUTE
    elif r < 0.8:
        t = t // (15 * MINUTE) * (15 * MINUTE)
    else:
        tz = ZONES[int(RNG.integers(len(ZONES)))]
        t = int(pd.Timestamp(t * MS, tz="UTC").tz_convert(tz).normalize().value // MS)
    return t + int(RNG.choice([0, 0, -1, 1]))


def random_range(min_len, max_len, names=VARS):
    """A range of log-uniform length in [min_len, max_len] that meets the data: mostly
    around a point of one of names (short ranges would often hold nothing), else anywhere."""
    length = int(np.exp(RNG.uniform(np.log(min_len), np.log(min(max_len, DATA[1] - DATA[0])))))
    pts = POINTS[str(RNG.choice([n for n in names if POINTS[n]] or VARS))]
    if RNG.random() < 0.75:
        start = pts[int(RNG.integers(len(pts)))][0] - int(RNG.integers(0, length + 1))
    else:
        start = int(RNG.integers(DATA[0] - length // 3, DATA[1] - 2 * length // 3))
    s0, start, end = start, edge(start), edge(start + length)
    if end <= start:
        end = max(s0 + length, start + 1)
    return start, end


def subset(k_max=3):
    k = int(RNG.integers(1, k_max + 1))
    names = list(RNG.choice(VARS, size=k, replace=False))
    if RNG.random() < 0.1:
        names.insert(int(RNG.integers(0, len(names) + 1)), "empty")
    return [str(n) for n in names]


def dst_days():
    """Every zone's offset changes inside the data: (zone, local day of the change)."""
    out = []
    for tz in ZONES:
        for t, _ in parity.utc_offsets(tz)[1:]:
            if DATA[0] < t < DATA[1]:
                out.append((tz, pd.Timestamp(t * MS, tz="UTC").tz_convert(tz).normalize()))
    return out


def statistics_cases():
    cases = []
    for i in range(130):
        names = subset(4)
        start, end = random_range(400, 260 * DAY, names)
        body = {"start": start, "end": end, "variables": names, "aggregations": E7_AGGS}
        cases.append({"name": f"E7 #{i} {start}..{end}", "body": body, "expected": statistics(body)})
    # one minute, inside a burst: many values a second apart
    for i, n in enumerate(("a", "b", "c")):
        t = POINTS[n][len(POINTS[n]) // 2][0]
        body = {"start": t - 30_001, "end": t + 29_999, "variables": [n], "aggregations": E7_AGGS}
        cases.append({"name": f"E7 one minute {n}", "body": body, "expected": statistics(body)})
    return cases


def resample_cases():
    cases = []

    def add(name, body):
        exp = parity.resample(body, SERIES)
        cases.append({"name": f"{name} {body['tz']} {body['period']} {body['aggregation']} "
                              f"join={body['join_dataframes']} {body['start']}..{body['end']}",
                      "body": body, "expected": exp})

    k = 0
    for tz in ZONES:
        for period in PERIODS:
            for agg in E8_AGGS:  # every zone × period × aggregation, each on its own random range
                names = subset()
                start, end = random_range(min(30_000, WIDTH[period] // 2), WIDTH[period] * 120, names)
                add("E8", {"variables": names, "tz": tz, "period": period, "aggregation": agg,
                           "join_dataframes": bool(RNG.random() < 0.5), "start": start, "end": end})
    # a day (and a bit) around every change of offset, where buckets go wrong first
    for tz, day in dst_days():
        for period in ("1T", "15T", "45T", "1H", "5H", "1D"):
            start = int(day.value // MS) - int(RNG.integers(0, 8 * HOUR)) + int(RNG.choice([0, 1, 777]))
            end = start + int(RNG.integers(20 * HOUR, 52 * HOUR)) + int(RNG.integers(0, 1000))
            if period == "1T":
                start, end = start + 20 * HOUR, start + 30 * HOUR + 12_345  # across the change, 600 buckets at most
            add("E8 DST", {"variables": subset(), "tz": tz, "period": period, "aggregation": E8_AGGS[k % 5],
                           "join_dataframes": bool(RNG.random() < 0.5), "start": start, "end": end})
            k += 1
    return cases


def aggregation_cases():
    cases = []
    for agg in E8_AGGS:
        for join in (False, True):
            for _ in range(4):
                names = subset(4)
                start, end = random_range(400, 260 * DAY, names)
                body = {"variables": names, "aggregation": agg, "join_dataframes": join,
                        "start": start, "end": end}
                cases.append({"name": f"E9 {agg} join={join} {start}..{end}", "body": body,
                              "expected": parity.aggregation(body, SERIES)})
    return cases


def main():
    assert parity.pytz_version() == parity.tzdata_version(), (parity.pytz_version(), parity.tzdata_version())
    out = {
        "generator": "pandas " + pd.__version__ + ", numpy " + np.__version__,
        "points": POINTS,
        "statistics": statistics_cases(),
        "resample": resample_cases(),
        "aggregation": aggregation_cases(),
    }
    out["tz"] = parity.tz_record(out["resample"])
    path = os.path.join(HERE, "fixtures.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {sum(len(p) for p in POINTS.values())} points, {len(out['statistics'])} statistics, "
          f"{len(out['resample'])} resample and {len(out['aggregation'])} aggregation cases, "
          f"{os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
