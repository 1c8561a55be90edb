#!/usr/bin/python3
"""Expected E8 (resample) and E9 (aggregation) answers computed by pandas.

The clients of this service were written against a pandas-backed implementation, so
the expected numbers come from pandas itself (Debian's python3-pandas 1.5.3), never
from the Go code. Run from the repository root:

    /usr/bin/python3 pkg/api/testdata/parity/gen.py   # Debian's python3 with pandas

It writes fixtures.json beside this script: the seeded points of each variable and the
cases (request body with variable names instead of ids, expected results), and
sweep.json (day and week labels of every common zone). Each file also records under
"tz" the tz rules pandas used: the tzdata version and, for every zone of its cases, the
UTC offsets over TZ_SPAN. resample_parity_test.go compares those with the database's
rules and skips, naming the zone, the cases where the two disagree (docs/queries.md).
Run it after a tzdata update that changes rules for 2026 (apt-get install tzdata).
"""
import calendar
import json
import os
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pandas as pd

assert pd.__version__.startswith("1.5"), pd.__version__

RNG = np.random.default_rng(20261122)
MS = 1_000_000  # nanoseconds per millisecond
AGGS = ["mean", "min", "max", "count", "sum"]


def ms(iso):
    return int(pd.Timestamp(iso).value // MS)


def irregular(start, end, mean_gap_min, gaps=()):
    """Points at exponential random intervals, minus the given [from, to) gaps."""
    t, out = ms(start), []
    stop = ms(end)
    while t < stop:
        if not any(ms(a) <= t < ms(b) for a, b in gaps):
            out.append([t, float(RNG.uniform(5, 40))])
        t += max(1, int(RNG.exponential(mean_gap_min * 60_000)))
    return out


def random_gaps(start, end, count, min_h, max_h):
    """count gaps of min_h..max_h hours somewhere in [start, end)."""
    lo, hi = ms(start), ms(end)
    gaps = []
    for _ in range(count):
        a = int(RNG.integers(lo, hi))
        b = a + int(RNG.uniform(min_h, max_h) * 3_600_000)
        gaps.append((pd.Timestamp(a, unit="ms", tz="UTC"), pd.Timestamp(b, unit="ms", tz="UTC")))
    return gaps


# a: dense; b: sparser with a 4-day hole; c: starts first (it sets the grid origin),
# then nothing for all of February (empty weeks and an empty month); empty: no values.
POINTS = {
    "a": irregular("2026-01-21T03:17:00Z", "2026-04-19T00:00Z", 10,
                   random_gaps("2026-01-21", "2026-04-19", 40, 1, 9)),
    "b": irregular("2026-01-25T11:00:00Z", "2026-04-18T00:00Z", 35,
                   [("2026-02-10", "2026-02-14T07:00Z")] + random_gaps("2026-01-25", "2026-04-18", 30, 2, 20)),
    "c": irregular("2026-01-20T14:05:00Z", "2026-01-28T00:00Z", 180)
    + irregular("2026-03-03T00:00:00Z", "2026-04-20T00:00Z", 180),
    "empty": [],
}
# around America/Santiago's September change, where local midnight does not exist
# and the autumn changes at 01:00 -> 00:00 of Atlantic/Azores and America/Havana, where
# local midnight happens twice (Havana's until tzdata 2026f, which keeps Cuba on summer
# time from November 2026; its cases stay, as a zone whose change was dropped)
POINTS["d"] = irregular("2026-09-01T10:00:00Z", "2026-11-10T00:00Z", 45, random_gaps("2026-09-01", "2026-11-10", 6, 3, 30))
# small integers: min and max are reached many times (ties resolve to the earliest)
POINTS["ties"] = [[ms("2026-02-02T00:00Z") + i * 3_600_000, float(RNG.integers(0, 5))] for i in range(200)]


def series(name):
    pts = POINTS[name]
    idx = pd.to_datetime([p[0] for p in pts], unit="ms", utc=True)
    return pd.Series([p[1] for p in pts], index=idx, dtype="float64")


SERIES = {n: series(n) for n in POINTS}


def in_range(s, start, end):
    """API.md §8 range rules (start/end in ms, inclusive)."""
    if start is None and end is None:
        return s.tail(100)
    if start is not None:
        s = s[s.index >= pd.Timestamp(start * MS, tz="UTC")]
    if end is not None:
        s = s[s.index <= pd.Timestamp(end * MS, tz="UTC")]
    return s


def num(v):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return float(v)


def round_half_away(v, places):
    """Half away from zero on the shortest decimal form of v."""
    if v is None or places is None:
        return v
    return float(Decimal(repr(v)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def pairs(r, precision):
    """A resampled Series as [[ts_ms, value], ...], newest first."""
    r = r.sort_index(ascending=False)
    return [[int(ts.value // MS), round_half_away(num(v), precision)] for ts, v in r.items()]


def resample(body, series=None):
    """The expected E8 results of body; series maps variable names to their values
    (default this file's SERIES; testdata/tiers/gen.py passes its own)."""
    series = SERIES if series is None else series
    tz = body.get("tz", "UTC")
    sel = [in_range(series[n], body.get("start"), body.get("end")) for n in body["variables"]]
    nonempty = [s for s in sel if len(s)]
    if not nonempty:
        per_var = [pd.Series(dtype="float64") for _ in sel]
    else:
        # the grid origin: local midnight of the day of the earliest value among the
        # requested variables (pandas' origin='start_day', shared by all variables)
        origin = min(s.index.min() for s in nonempty).tz_convert(tz).normalize()
        per_var = [
            s.tz_convert(tz).resample(body["period"], origin=origin).agg(body["aggregation"])
            if len(s) else pd.Series(dtype="float64")
            for s in sel
        ]
    precision = body.get("precision")
    if not body.get("join_dataframes", False):
        return [pairs(r, precision) for r in per_var]
    frames = [r.rename(i) for i, r in enumerate(per_var) if len(r)]
    if not frames:
        return []
    df = pd.concat(frames, axis=1).sort_index(ascending=False)
    rows = []
    for ts, row in df.iterrows():
        vals = [round_half_away(num(row[i]), precision) if i in df.columns else None
                for i in range(len(per_var))]
        rows.append([int(ts.value // MS)] + vals)
    return rows


def aggregate(s, agg):
    """One [ts, v] pair: ts of the earliest value reaching min/max, else of the latest."""
    if agg in ("min", "max"):
        ts = s.idxmin() if agg == "min" else s.idxmax()  # first occurrence in time order
        return [int(ts.value // MS), float(s[ts])]
    return [int(s.index.max().value // MS), float(s.agg(agg))]


def aggregation(body, series=None):
    """The expected E9 results of body (series as for resample)."""
    series = SERIES if series is None else series
    sel = [in_range(series[n], body.get("start"), body.get("end")) for n in body["variables"]]
    p = body.get("precision")
    agg = body["aggregation"]
    if body.get("join_dataframes", False):
        allv = pd.concat([s for s in sel if len(s)] or [pd.Series(dtype="float64")]).sort_index(kind="stable")
        if not len(allv):
            return []
        ts, v = aggregate(allv, agg)
        return [[ts, round_half_away(v, p)]]
    out = []
    for s in sel:
        if not len(s):
            out.append([])
            continue
        ts, v = aggregate(s, agg)
        out.append([[ts, round_half_away(v, p)]])
    return out


# Each zone with a window around its DST change (or any day without one): minute and
# hour buckets are checked there, where they are most likely to go wrong.
ZONES = {
    "UTC": "2026-03-08",
    "America/New_York": "2026-03-08",     # 02:00 -> 03:00
    "Europe/Berlin": "2026-03-29",        # 02:00 -> 03:00
    "Australia/Lord_Howe": "2026-04-05",  # 02:00 -> 01:30, a 30-minute shift
    "Pacific/Chatham": "2026-04-05",      # 03:45 -> 02:45, +13:45 -> +12:45
    "Australia/Sydney": "2026-04-05",     # 03:00 -> 02:00, southern hemisphere
    "America/Santiago": "2026-04-05",     # 24:00 -> 23:00 the day before
    "Asia/Kolkata": "2026-03-15",         # +05:30, no DST
}
WINDOW_PERIODS = ["15T", "1H", "5H", "D"]
FULL_PERIODS = ["5H", "D", "2D", "3D", "W", "M"]
FULL = (ms("2026-01-01T00:00Z"), ms("2026-05-01T00:00Z"))


def window(tz, day):
    """From 05:17 local the day before the change to two days after it."""
    start = pd.Timestamp(day).tz_localize(tz) - pd.Timedelta(hours=18, minutes=43)
    return int(start.value // MS), int((start + pd.Timedelta(days=3)).value // MS)


def resample_cases():
    cases = []

    def add(name, **body):
        body.setdefault("variables", ["a", "b", "c"])
        cases.append({"name": name, "body": body, "expected": resample(body)})

    for tz, day in ZONES.items():
        w = window(tz, day)
        for period, (start, end) in [(p, w) for p in WINDOW_PERIODS] + [(p, FULL) for p in FULL_PERIODS]:
            for agg in AGGS:
                for join in (False, True):
                    add(f"{tz} {period} {agg} join={join} {start}..{end}", tz=tz, period=period,
                        aggregation=agg, join_dataframes=join, start=start, end=end)
    # Santiago moves from 24:00 on Saturday 5 September to 01:00: the D label of Sunday
    # is the first instant after the gap, as pandas' date_range shift_forward gives it
    # (the data starts days before, so pandas' origin itself exists). W is left out:
    # pandas 1.5 raises NonExistentTimeError on the Sunday label there.
    autumn = [("America/Santiago", "2026-09-05"), ("Atlantic/Azores", "2026-10-24"), ("America/Havana", "2026-10-31")]
    for tz, day in autumn:
        for period, (start, end) in [(p, window(tz, day)) for p in WINDOW_PERIODS] + [
                (p, (ms("2026-08-25T00:00Z"), ms("2026-11-15T00:00Z"))) for p in ("D", "2D", "M")]:
            for agg in AGGS:
                for join in (False, True):
                    add(f"{tz} autumn {period} {agg} join={join}", variables=["d", "c"],
                        tz=tz, period=period, aggregation=agg, join_dataframes=join, start=start, end=end)
    for tz in ("America/New_York", "Pacific/Chatham"):
        for agg in AGGS:
            for join in (False, True):
                add(f"{tz} last 100 H {agg} join={join}", tz=tz, period="H", aggregation=agg, join_dataframes=join)
                add(f"{tz} last 100 D {agg} join={join}", tz=tz, period="D", aggregation=agg, join_dataframes=join)
                add(f"{tz} only start 6H {agg} join={join}", tz=tz, period="6H", aggregation=agg,
                    join_dataframes=join, start=ms("2026-04-12T00:00Z"))
                add(f"{tz} only end 4H {agg} join={join}", tz=tz, period="4H", aggregation=agg,
                    join_dataframes=join, end=ms("2026-01-27T00:00Z"))
                add(f"{tz} only end W {agg} join={join}", tz=tz, period="W", aggregation=agg,
                    join_dataframes=join, end=ms("2026-03-20T00:00Z"))
    for p in (0, 1, 3):
        for agg in ("mean", "sum"):
            add(f"precision {p} {agg}", tz="Europe/Berlin", period="2D", aggregation=agg, precision=p,
                start=FULL[0], end=FULL[1])
            add(f"precision {p} {agg} join", tz="Europe/Berlin", period="30T", aggregation=agg, precision=p,
                join_dataframes=True, start=ms("2026-03-28T21:00Z"), end=ms("2026-03-29T03:00Z"))
    for join in (False, True):
        add(f"request order and an empty variable join={join}", variables=["c", "empty", "a"], tz="Asia/Kolkata",
            period="W", aggregation="count", join_dataframes=join, start=FULL[0], end=FULL[1])
        add(f"nothing in range join={join}", tz="UTC", period="D", aggregation="sum", join_dataframes=join,
            start=ms("2025-01-01T00:00Z"), end=ms("2025-02-01T00:00Z"))
        add(f"default tz and join, T alias join={join}", variables=["c"], period="T", aggregation="max",
            start=ms("2026-03-10T00:00Z"), end=ms("2026-03-10T12:00Z"), join_dataframes=join)
    return cases


def aggregation_cases():
    cases = []
    ranges = {
        "range": {"start": ms("2026-02-01T00:00Z"), "end": ms("2026-02-20T00:00Z")},  # c has nothing
        "last 100": {},
        "only start": {"start": ms("2026-04-15T00:00Z")},
        "only end": {"end": ms("2026-01-26T00:00Z")},
        "nothing": {"start": ms("2025-01-01T00:00Z"), "end": ms("2025-02-01T00:00Z")},
    }
    for rname, rng in ranges.items():
        for agg in AGGS:
            for join in (False, True):
                body = {"variables": ["a", "b", "c", "empty"], "aggregation": agg,
                        "join_dataframes": join, "tz": "Asia/Kolkata", **rng}
                cases.append({"name": f"{rname} {agg} join={join}", "body": body, "expected": aggregation(body)})
    for p in (0, 2):
        body = {"variables": ["b", "a"], "aggregation": "mean", "precision": p, "start": FULL[0], "end": FULL[1]}
        cases.append({"name": f"precision {p}", "body": body, "expected": aggregation(body)})
    for agg in ("min", "max"):
        for join in (False, True):
            body = {"variables": ["ties", "a"], "aggregation": agg, "join_dataframes": join,
                    "start": ms("2026-02-02T00:00Z"), "end": ms("2026-02-05T00:00Z")}
            cases.append({"name": f"ties {agg} join={join}", "body": body, "expected": aggregation(body)})
    return cases


def sweep_cases():
    """Day and week labels in every common zone, over both seasons of changes. Zones
    where pandas itself raises (a local midnight that does not exist or happens twice
    on a label or the origin) are listed as skipped, with pandas' error."""
    import pytz

    # links (US/Eastern, Canada/Pacific, ...) are left out: Debian 13 ships them only in
    # tzdata-legacy, which the database image does not install
    with open("/usr/share/zoneinfo/tzdata.zi") as f:
        links = {line.split()[2] for line in f if line.startswith("L ")}
    cases, skipped = [], {}
    spans = [("a", ms("2026-03-01T00:00Z"), ms("2026-04-15T00:00Z")),
             ("d", ms("2026-09-01T00:00Z"), ms("2026-11-10T00:00Z"))]
    for tz in (z for z in pytz.common_timezones if z not in links):
        for var, start, end in spans:
            for period in ("D", "W"):
                body = {"variables": [var], "aggregation": "count", "period": period, "tz": tz,
                        "start": start, "end": end}
                try:
                    cases.append({"name": f"{tz} {period} {var}", "body": body, "expected": resample(body)})
                except Exception as e:  # pandas' own limits, see the docstring
                    skipped[f"{tz} {period} {var}"] = f"{type(e).__name__}: {e}"
    return cases, skipped


# Every case's labels, values and origin lie in this span; the test checks it covers them.
TZ_SPAN = (ms("2025-11-01T00:00Z"), ms("2027-01-01T00:00Z"))


def tzdata_version():
    """The version of the system tz database, which Debian's pytz (so pandas) reads."""
    with open("/usr/share/zoneinfo/tzdata.zi") as f:
        first = f.readline().split()
    assert first[:2] == ["#", "version"], first
    return first[2]


def utc_offsets(tz):
    """[[from_ms, utc_offset_seconds], ...] over TZ_SPAN as pandas sees tz: the offset at
    the span's start, then one entry per change of offset (not of abbreviation or DST flag)."""
    def offset_at(t):
        return int(pd.Timestamp(t * MS, tz="UTC").tz_convert(tz).utcoffset().total_seconds())

    out = [[TZ_SPAN[0], offset_at(TZ_SPAN[0])]]
    zone = pd.Timestamp(0, tz=tz).tz
    for when in getattr(zone, "_utc_transition_times", []):  # pytz, the zone's UTC change instants
        t = calendar.timegm(when.timetuple()) * 1000
        if TZ_SPAN[0] < t < TZ_SPAN[1] and offset_at(t) != out[-1][1]:
            assert offset_at(t - 1) == out[-1][1], (tz, t)
            out.append([t, offset_at(t)])
    return out


def tz_record(cases):
    zones = sorted({c["body"].get("tz", "UTC") for c in cases if "period" in c["body"]})
    return {"tzdata": tzdata_version(), "span": list(TZ_SPAN), "offsets": {z: utc_offsets(z) for z in zones}}


def main():
    assert pytz_version() == tzdata_version(), (pytz_version(), tzdata_version())
    out = {
        "generator": "pandas " + pd.__version__,
        "points": POINTS,
        "resample": resample_cases(),
        "aggregation": aggregation_cases(),
    }
    out["tz"] = tz_record(out["resample"])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {len(out['resample'])} resample and {len(out['aggregation'])} aggregation cases")
    cases, skipped = sweep_cases()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweep.json")
    with open(path, "w") as f:
        json.dump({"generator": out["generator"], "tz": tz_record(cases), "resample": cases,
                   "skipped": skipped}, f, separators=(",", ":"), indent=None)
        f.write("\n")
    print(f"{path}: {len(cases)} zone sweep cases, {len(skipped)} skipped where pandas raises")


def pytz_version():
    import pytz
    return pytz.OLSON_VERSION


if __name__ == "__main__":
    main()
