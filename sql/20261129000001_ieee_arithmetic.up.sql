-- IEEE arithmetic (issue 26, a defect found with hostile values): PostgreSQL's float8 `+`,
-- `*`, `/` and sum() raise "value out of range" where IEEE 754 arithmetic overflows to
-- ±Infinity (or a product rounds to 0), so a second value of 1e308 in a tile failed the
-- write that added it (500), and any read, rebuild or synthetic expression whose result
-- passed the largest double failed too. Every sum of values or tiles goes through these
-- functions instead (querybuilder.SumSQL, ingest's addTilesSQL), and so does a synthetic
-- expression's arithmetic where it could overflow (querybuilder/magnitude.go): they give
-- what IEEE arithmetic gives and never raise. Readers answer a sum or mean that is not
-- finite as null, and a synthetic expression has no value there (ieee_finite;
-- docs/queries.md, docs/synthetic.md).
--
-- Below 1e290 the plain float8 sum is taken: it cannot overflow before 10^18 terms. Larger
-- magnitudes are summed scaled by 2^-600: scaling by a power of two only moves the exponent,
-- so it is exact, and the scaled sum cannot overflow. ieee_up scales back, or saturates when
-- the scaled sum is at least 2^424 (the image of 2^1024, the first magnitude past the
-- largest double). All are plain SQL expressions, inlined into the statements that use them.

-- ieee_down(x): x · 2^-600, and 0 for magnitudes below 1e-100, which are negligible next to
-- any term that is scaled (and whose scaled image PostgreSQL would refuse as an underflow).
CREATE FUNCTION ieee_down(x float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN abs(x) < 1e-100 THEN 0::float8 ELSE x * 2.409919865102884e-181 END
$$;

-- ieee_up(s): the scaled sum s back at scale, ±Infinity past the largest double (NaN stays).
CREATE FUNCTION ieee_up(s float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN abs(s) < 4.332296397063773e127 THEN s * 4.149515568880993e180
              ELSE s * 'Infinity'::float8 END
$$;

-- ieee_add(a, b): a + b as IEEE arithmetic gives it.
CREATE FUNCTION ieee_add(a float8, b float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN abs(a) < 1e290 AND abs(b) < 1e290 THEN a + b
              ELSE ieee_up(ieee_down(a) + ieee_down(b)) END
$$;

-- ieee_join(small, big): the IEEE sum of a group of terms from its two parts, small = the
-- plain sum of the terms below 1e290, big = the sum of ieee_down of the others (NULL when
-- there are none: then small, NULL too for an empty group).
CREATE FUNCTION ieee_join(small float8, big float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN big IS NULL THEN small ELSE ieee_up(big + coalesce(ieee_down(small), 0)) END
$$;

-- ieee_finite(x): x when it is finite, else NULL: what the readers answer for a sum or mean
-- past the largest double (JSON has no infinities), and what a synthetic window yields there
-- (no value, API.md §17). It names x once (PostgreSQL counts NaN equal to NaN), so that it
-- is inlined whatever x is: PostgreSQL calls a SQL function that names an argument twice,
-- when that argument is an expression of more than ten operators, row by row instead
-- (measured: +50% on an E8 mean over 100 variables, a synthetic backfill 3× slower).
CREATE FUNCTION ieee_finite(x float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT nullif(nullif(nullif(x, 'Infinity'::float8), '-Infinity'::float8), 'NaN'::float8)
$$;

-- ieee_of(p): the double nearest the exact number p, ±Infinity past the largest double and
-- 0 below half the smallest subnormal (PostgreSQL's cast raises "out of range" for both).
CREATE FUNCTION ieee_of(p numeric) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN abs(p) >= 179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792
              THEN sign(p)::float8 * 'Infinity'::float8
              WHEN abs(p) <= 2.4703282292062328e-324 THEN 0::float8
              ELSE p::float8 END
$$;

-- finite_add(a, b), finite_mul(a, b), finite_div(a, b): a + b, a × b and a ÷ b as IEEE
-- arithmetic gives them when that is finite, else NULL (and NULL for b = 0): a synthetic
-- expression's operators for the rows whose inputs the plain operators could overflow
-- on (querybuilder/magnitude.go), and diff. Operands between 1e-150 and 1e150 in magnitude
-- cannot overflow or underflow a product or quotient: the plain operators; others are
-- computed exactly in numeric (a float8's text is its exact shortest decimal; numeric
-- division keeps at least 16 significant digits) and rounded by ieee_of. Nested, these
-- are not inlined (an argument of more than ten operators named twice): PostgreSQL calls
-- them row by row, which is why the plain operators take every row they can.
CREATE FUNCTION finite_add(a float8, b float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT ieee_finite(ieee_add(a, b))
$$;

CREATE FUNCTION finite_mul(a float8, b float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT ieee_finite(CASE WHEN a = 0 OR b = 0 OR (abs(a) BETWEEN 1e-150 AND 1e150 AND abs(b) BETWEEN 1e-150 AND 1e150) THEN a * b
                          ELSE ieee_of(a::text::numeric * b::text::numeric) END)
$$;

CREATE FUNCTION finite_div(a float8, b float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT ieee_finite(CASE WHEN b = 0 THEN NULL
                          WHEN a = 0 OR (abs(a) BETWEEN 1e-150 AND 1e150 AND abs(b) BETWEEN 1e-150 AND 1e150) THEN a / b
                          ELSE ieee_of(a::text::numeric / b::text::numeric) END)
$$;
