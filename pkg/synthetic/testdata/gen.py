#!/usr/bin/python3
"""Expected values of synthetic expressions (API.md §17), computed by pandas.

The expected numbers come from pandas/numpy (Debian's python3-pandas 1.5), never from
the Go code or the database. Run from the repository root:

    /usr/bin/python3 pkg/synthetic/testdata/gen.py

It writes fixtures.json beside this script: the points of the inputs a and b of device
"d" (partly the same timestamps, b with zeros), and one case per expression with its
expected [[ts_ms, value], ...], oldest first. fixtures_test.go replays them against
the real service: once as a backfill (expressions defined over stored values), once
live (expressions defined first, values written after in shuffled batches).

Semantics mirrored here (docs/synthetic.md):
- pointwise: the inner join of the inputs on timestamp; non-finite results dropped;
- diff/shift/cumsum: over the argument's values in timestamp order (pandas);
- windows: Series.resample(period, origin=local midnight of the argument's first
  value's day) in the zone, exactly E8's buckets; one value per non-empty bucket,
  stamped with E8's label (nT/nH/nD: start; W: Sunday; M: last day of the month).
"""
import json
import os
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pandas as pd

assert pd.__version__.startswith("1.5"), pd.__version__
np.seterr(all="ignore")
RNG = np.random.default_rng(20261126)
MS = 1_000_000


def ms(iso):
    return int(pd.Timestamp(iso).value // MS)


# a: irregular points around Europe/Berlin's change to summer time (2026-03-29) and
# Asia/Kathmandu's +05:45 days, values from -10 to 40 (sqrt and ln meet negatives)
a_ts, t = [], ms("2026-03-25T21:13:00Z")
while t < ms("2026-04-03T00:00:00Z"):
    a_ts.append(t)
    t += int(RNG.exponential(25 * 60_000)) + 1
A = {ts: round(float(RNG.uniform(-10, 40)), 3) for ts in a_ts}
# b: half of a's timestamps, and as many of its own; a tenth of its values are 0
b_ts = sorted(set(RNG.choice(a_ts, len(a_ts) // 2, replace=False).tolist())
              | {ms("2026-03-26T00:00:00Z") + int(x) for x in RNG.integers(0, 7 * 86_400_000, len(a_ts) // 2)})
B = {int(ts): (0.0 if RNG.random() < 0.1 else round(float(RNG.uniform(-5, 20)), 3)) for ts in b_ts}


def series(points):
    idx = pd.to_datetime(sorted(points), unit="ms", utc=True)
    return pd.Series([points[k] for k in sorted(points)], index=idx, dtype="float64")


a, b = series(A), series(B)


def finite(s):
    return s[np.isfinite(s)]


def join(*ss):
    df = pd.concat(ss, axis=1, join="inner")
    return [df[c] for c in df.columns]


def pw(f, *ss):
    cols = join(*ss)
    return finite(pd.Series(f(*[c.values for c in cols]), index=cols[0].index, dtype="float64"))


def round_half_away(v, places):
    return float(Decimal(repr(v)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def window(s, agg, period, tz="UTC"):
    local = s.tz_convert(tz)
    origin = local.index.min().normalize()
    r = local.resample(period, origin=origin)
    n = r.count()
    v = {"mean": r.mean, "sum": r.sum, "min": r.min, "max": r.max, "count": r.count,
         "first": r.first, "last": r.last, "std": r.std}[agg]()
    v = v[n > 0].astype("float64")
    return finite(v.dropna())


CASES = []


def case(expr, s):
    CASES.append({"expr": expr, "expected": [[int(ts.value // MS), float(v)] for ts, v in s.sort_index().items()]})


A_, B_ = "{{d.a}}", "{{d.b}}"
case(f"({A_} * 9/5) + 32", pw(lambda x: (x * 9 / 5) + 32, a))
case(f"{A_} + {B_}", pw(np.add, a, b))
case(f"{A_} - {B_}", pw(np.subtract, a, b))
case(f"{A_} * {B_}", pw(np.multiply, a, b))
case(f"{A_} / {B_}", pw(np.divide, a, b))  # b's zeros: no value
case(f"{A_} % {B_}", pw(np.mod, a, b))
case(f"{A_} ^ 2", pw(lambda x: x ** 2, a))
case(f"{B_} ^ -1", pw(lambda x: x ** -1.0, b))
case(f"{A_} ^ 0.5", pw(lambda x: np.power(x, 0.5), a))  # negatives: no value
case(f"-{A_} ^ 2", pw(lambda x: -(x ** 2), a))
for op, f in [("<", np.less), ("<=", np.less_equal), (">", np.greater), (">=", np.greater_equal),
              ("==", np.equal), ("!=", np.not_equal)]:
    case(f"{A_} {op} {B_}", pw(lambda x, y, f=f: f(x, y).astype(float), a, b))
case(f"{A_} > 10 and {B_} > 5", pw(lambda x, y: ((x > 10) & (y > 5)).astype(float), a, b))
case(f"{A_} > 10 or {B_} > 5", pw(lambda x, y: ((x > 10) | (y > 5)).astype(float), a, b))
case(f"not {B_}", pw(lambda y: (y == 0).astype(float), b))
for fn, f in [("abs", np.abs), ("sqrt", np.sqrt), ("exp", lambda x: np.exp(x / 10)), ("ln", np.log), ("log10", np.log10),
              ("floor", np.floor), ("ceil", np.ceil), ("sin", np.sin), ("cos", np.cos), ("tan", np.tan)]:
    arg = f"{A_} / 10" if fn == "exp" else A_
    case(f"{fn}({arg})", pw(f, a))
case(f"round({A_} / 7, 2)", pw(lambda x: np.array([round_half_away(v, 2) for v in x / 7]), a))
case(f"round({A_}, -1)", pw(lambda x: np.array([round_half_away(v, -1) for v in x]), a))
case(f"min({A_}, {B_})", pw(np.minimum, a, b))
case(f"max({A_}, {B_})", pw(np.maximum, a, b))
case(f"where({A_} > {B_}, {A_}, {B_} * 2)", pw(lambda x, y: np.where(x > y, x, y * 2), a, b))
case(f"diff({A_})", finite(a.diff().dropna()))
case(f"shift({B_}, 3)", finite(b.shift(3).dropna()))
case(f"cumsum({A_})", finite(a.cumsum()))
case(f"diff({A_} * {B_})", finite(pw(np.multiply, a, b).diff().dropna()))
for agg in ["mean", "sum", "min", "max", "count", "first", "last", "std"]:
    for period, tz in [("1H", "UTC"), ("1D", "Asia/Kathmandu"), ("1D", "Europe/Berlin")]:
        case(f'{agg}({A_}, "{period}", "{tz}")', window(a, agg, period, tz))
for period, tz in [("15T", "UTC"), ("5H", "Europe/Berlin"), ("2D", "Europe/Berlin"), ("W", "Europe/Berlin"),
                   ("M", "Asia/Kathmandu"), ("90T", "Asia/Kathmandu")]:
    case(f'mean({B_}, "{period}", "{tz}")', window(b, "mean", period, tz))
case(f'sum({A_} * {B_}, "1D", "Europe/Berlin")', window(pw(np.multiply, a, b), "sum", "1D", "Europe/Berlin"))
case(f'max({A_}, "1H") - min({A_}, "1H")',
     pw(np.subtract, window(a, "max", "1H"), window(a, "min", "1H")))
case(f'diff(mean({A_}, "1D", "Europe/Berlin"))', finite(window(a, "mean", "1D", "Europe/Berlin").diff().dropna()))

out = {"pandas": pd.__version__,
       "points": {"a": [[k, v] for k, v in sorted(A.items())], "b": [[k, v] for k, v in sorted(B.items())]},
       "cases": CASES}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures.json"), "w") as f:
    json.dump(out, f, indent=0)
print(len(CASES), "cases,", len(A), "+", len(B), "points")
