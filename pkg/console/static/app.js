// The sensorapi console (API.md §14): plain ES modules, no framework, no bundler. It
// only calls the public API with the user's token, sent in the X-Auth-Token header
// and never in a URL; the token lives in this tab's sessionStorage.
import uPlot from "/console/vendor/uplot/uPlot.esm.js";

const view = document.getElementById("view");
const errorBox = document.getElementById("error");
const TOKEN = "sensorapi.token";
let cleanup = () => {}; // stops the current view's timers

// --- token and API ---------------------------------------------------------------

function token() { return sessionStorage.getItem(TOKEN); }

// A #token=… fragment logs in and is removed from the address bar at once.
function takeTokenFromFragment() {
  const m = location.hash.match(/^#token=([^&]+)/);
  if (!m) return;
  sessionStorage.setItem(TOKEN, decodeURIComponent(m[1]));
  history.replaceState(null, "", location.pathname + "#/devices");
}

class APIError extends Error {}

// api calls the service and turns every failure into a message fit for the page.
async function api(method, path, body) {
  let resp;
  try {
    resp = await fetch(path, {
      method,
      headers: { "X-Auth-Token": token() || "", "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new APIError("The server cannot be reached: " + e.message);
  }
  let data = null;
  try { data = await resp.json(); } catch { /* not JSON */ }
  if (resp.ok) return data;
  const detail = data && (data.detail || data.message);
  switch (resp.status) {
    case 401:
      throw new APIError("The token is wrong or was revoked. Log in again.");
    case 403:
      throw new APIError("This token may not do that (its scope does not cover it).");
    case 429:
      throw new APIError(`Too many requests: retry in ${resp.headers.get("Retry-After") || "a few"} s.`);
  }
  if (resp.status >= 500) {
    throw new APIError(`The server failed (${resp.status}): ${data && data.message || resp.statusText}`);
  }
  throw new APIError(`${resp.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
}

function showError(e) {
  errorBox.textContent = e instanceof APIError ? e.message : "Unexpected error: " + e;
  errorBox.hidden = false;
}

function clearError() { errorBox.hidden = true; errorBox.textContent = ""; }

// --- small DOM helpers -------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function when(ms) { return ms ? new Date(ms).toLocaleString() : "never"; }

function show(...nodes) { view.replaceChildren(...nodes); }

// --- views ---------------------------------------------------------------------------

function loginView(next) {
  const input = el("input", { id: "token-input", type: "password", placeholder: "paste a token", autocomplete: "off" });
  const form = el("form", { class: "login", on: { submit: (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN, input.value.trim());
    location.hash = next || "#/devices";
    route();
  } } }, input, el("button", { id: "login", type: "submit" }, "Log in"));
  show(el("h2", {}, "Log in"), el("p", { class: "muted" },
    "A read-only token is enough. It stays in this tab and is sent only in the X-Auth-Token header."), form);
}

async function devicesView(params) {
  const page = Number(params.get("page") || 1);
  const search = params.get("search") || "";
  const q = new URLSearchParams({ page, page_size: 20, sort_by: "label" });
  if (search) q.set("search", search);
  const data = await api("GET", "/api/v2.0/devices/?" + q);
  const box = el("input", { id: "search", type: "search", value: search, placeholder: "search label or name" });
  box.addEventListener("change", () => { location.hash = "#/devices?search=" + encodeURIComponent(box.value); });
  const rows = data.results.map((d) => el("tr", { "data-device": d.label },
    el("td", {}, el("a", { href: "#/devices/" + encodeURIComponent(d.label) }, d.label)),
    el("td", {}, d.name), el("td", {}, d.variablesNumber), el("td", { class: "last-activity" }, when(d.lastActivity))));
  const link = (p, text) => el("a", { href: `#/devices?page=${p}&search=${encodeURIComponent(search)}` }, text);
  show(el("h2", {}, "Devices"), box,
    el("table", { id: "devices" }, el("tr", {}, el("th", {}, "label"), el("th", {}, "name"),
      el("th", {}, "variables"), el("th", {}, "last activity")), ...rows),
    el("div", { class: "pager" }, data.previous ? link(page - 1, "← previous") : "",
      el("span", { class: "muted" }, `page ${page}, ${data.count} devices`), data.next ? link(page + 1, "next →") : ""));
}

async function deviceView(label) {
  const path = `/api/v2.0/devices/~${encodeURIComponent(label)}/variables/?page_size=200&sort_by=label`;
  const table = el("table", { id: "variables" });
  show(el("h2", {}, "Device ", label), el("p", { class: "muted" }, "Last values refresh every 1.5 s."), table);
  const refresh = async () => {
    const data = await api("GET", path);
    table.replaceChildren(el("tr", {}, el("th", {}, "variable"), el("th", {}, "last value"), el("th", {}, "at")),
      ...data.results.map((v) => el("tr", { "data-variable": v.label },
        el("td", {}, el("a", { href: "#/variables/" + v.id }, v.label)),
        el("td", { class: "last-value" }, v.lastValue && v.lastValue.value !== undefined ? v.lastValue.value : "—"),
        el("td", {}, when(v.lastValue && v.lastValue.timestamp)))));
  };
  await refresh();
  const timer = setInterval(() => refresh().then(clearError, showError), 1500);
  cleanup = () => clearInterval(timer);
}

const RANGES = { hour: 3600e3, day: 86400e3, week: 7 * 86400e3, month: 30 * 86400e3, year: 365 * 86400e3 };

async function variableView(id, params) {
  const v = await api("GET", "/api/v2.0/variables/" + encodeURIComponent(id));
  const zone = params.get("tz") || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const pick = (name, options, value) => el("label", {}, name,
    el("select", { id: name }, ...options.map((o) => { const opt = el("option", { value: o }, o); opt.selected = o === value; return opt; })));
  const controls = el("div", { class: "controls" },
    pick("aggregation", ["mean", "min", "max", "count", "sum", "twa", "integral", "coverage", "increase"], params.get("aggregation") || "mean"),
    // the time-aware aggregations read the values as a signal (API.md §20)
    pick("method", ["locf", "linear"], params.get("method") || "locf"),
    el("label", {}, "max gap (s)", el("input", { id: "max_gap", type: "number", min: "0", step: "any", size: 7, value: params.get("max_gap") || "" })),
    pick("fill", ["none", "zero", "previous", "linear"], params.get("fill") || "none"),
    pick("period", ["1T", "5T", "15T", "1H", "6H", "1D", "W", "M"], params.get("period") || "1H"),
    el("label", {}, "time zone", el("input", { id: "tz", value: zone, size: 18 })),
    pick("range", [...Object.keys(RANGES), "custom"], params.get("range") || "day"),
    el("label", {}, "from", el("input", { id: "start", type: "datetime-local" })),
    el("label", {}, "to", el("input", { id: "end", type: "datetime-local" })));
  const chart = el("div", { id: "chart" });
  const sql = el("pre", { id: "sql" }), plan = el("pre", { id: "plan" }), exec = el("span", { id: "exec-ms" });
  const planText = el("pre", { id: "plan-text" });
  const copy = (pre) => el("button", { on: { click: () => navigator.clipboard.writeText(pre.textContent) } }, "copy");
  show(el("h2", {}, `${v.label} `, el("span", { class: "muted" }, v.name)), controls,
    el("div", { class: "split" }, chart, el("div", {},
      // a synthetic variable's values come from its expression (API.md §17)
      v.type === "synthetic" ? el("div", { class: "block" }, el("h3", {}, "Synthetic: computed from"),
        el("pre", { id: "expression" }, v.syntheticExpression)) : "",
      el("div", { class: "block" }, el("h3", {}, "SQL (as sensorapi compile prints it)", copy(sql)), sql),
      el("div", { class: "block" }, el("h3", {}, el("span", {}, "Plan, as psql prints EXPLAIN (ANALYZE, BUFFERS): executed in ", exec, " ms"),
        copy(planText)), planText),
      el("div", { class: "block" }, el("h3", {}, "The same plan as the API returns it (FORMAT JSON)", copy(plan)), plan))));
  const panes = { sql, plan, planText, exec };
  for (const c of controls.querySelectorAll("select, input")) c.addEventListener("change", () => load(id, chart, panes));
  await load(id, chart, panes);
}

// body is the resample request the pickers describe.
function body(id) {
  const val = (x) => document.getElementById(x).value;
  let end = Date.now(), start = end - (RANGES[val("range")] || RANGES.day);
  if (val("range") === "custom" && val("start") && val("end")) {
    start = new Date(val("start")).getTime();
    end = new Date(val("end")).getTime();
  }
  const req = { variables: [id], aggregation: val("aggregation"), period: val("period"), tz: val("tz").trim(),
    start: Math.floor(start), end: Math.floor(end), join_dataframes: false, method: val("method"), fill: val("fill") };
  if (Number(val("max_gap")) > 0) req.max_gap = Number(val("max_gap"));
  return req;
}

// loads counts the chart's requests: pickers changed in quick succession send several,
// whose answers may come back in any order, and only the latest may be drawn.
let loads = 0;

async function load(id, chart, { sql, plan, planText, exec }) {
  const req = body(id), mine = ++loads;
  const data = await api("POST", "/api/v1.6/data/stats/resample/", req).catch((e) => { showError(e); return null; });
  if (!data || mine !== loads) return;
  clearError();
  chart.dataset.request = JSON.stringify(req); // what is drawn, for whoever inspects the page
  const rows = (data.results[0] || []).slice().reverse(); // the API answers newest first
  const xs = rows.map((r) => r[0] / 1000), ys = rows.map((r) => r[1]);
  if (window.consoleChart) window.consoleChart.destroy();
  window.consoleChart = new uPlot({
    width: chart.clientWidth || 700, height: 320, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), req.tz),
    // empty buckets stay gaps; points keep lone buckets between gaps visible
    series: [{}, { label: `${req.aggregation} per ${req.period}` + (req.fill !== "none" ? ` (fill ${req.fill})` : ""),
      stroke: "#3060d0", width: 1.5, spanGaps: false,
      points: { show: xs.length <= 2000, size: 4 } }],
  }, [xs, ys], chart);
  const [compiled, analyzed] = await Promise.all([
    api("POST", "/api/v1.6/data/stats/resample/?explain=sql", req),
    api("POST", "/api/v1.6/data/stats/resample/?explain=analyze", req),
  ]).catch((e) => { showError(e); return [null, null]; });
  if (!compiled || mine !== loads) return;
  sql.textContent = compiled.psql;
  plan.textContent = JSON.stringify(analyzed.plan, null, 2);
  planText.textContent = planAsText(analyzed.plan);
  exec.textContent = analyzed.execution_ms.toFixed(2);
}

// --- EXPLAIN's JSON plan as psql prints the text format ----------------------------------
// The API returns EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) (one execution); this lays the
// same plan out as PostgreSQL's text format (explain.c: headers, "->" arrows, indents of
// 2 per level, details, buffers, planning and execution time), so that it reads as in psql.
// One difference: psql prints a "Rows Removed by …" average that rounds to 0 when some rows
// were removed; the JSON holds the rounded 0 alone, so such lines are left out here.

// Keywords that quote_identifier quotes (PostgreSQL's reserved, column-name and
// type/function-name keywords).
const QUOTED_KEYWORDS = new Set(("all analyse analyze and any array as asc asymmetric authorization between bigint binary bit both " +
  "boolean case cast char character check coalesce collate collation column concurrently constraint create cross " +
  "current_catalog current_date current_role current_schema current_time current_timestamp current_user dec decimal " +
  "default deferrable desc distinct do else end except exists extract false fetch float for foreign freeze from full " +
  "grant greatest group grouping having ilike in initially inner inout int integer intersect interval into is isnull " +
  "join lateral leading least left like limit localtime localtimestamp national natural nchar none normalize not " +
  "notnull null nullif numeric offset on only or order out outer overlaps overlay placing position precision primary " +
  "real references returning right row select session_user setof similar smallint some substring symmetric " +
  "system_user table tablesample then time timestamp to trailing treat trim true union unique user using values " +
  "varchar variadic verbose when where window with").split(" "));

function quoteIdent(s) {
  return /^[a-z_][a-z0-9_$]*$/.test(s) && !QUOTED_KEYWORDS.has(s) ? s : `"${s.replace(/"/g, '""')}"`;
}

function nodeName(n) {
  let name = n["Node Type"];
  const join = n["Join Type"] && n["Join Type"] !== "Inner" ? n["Join Type"] : "";
  if (name === "Aggregate") {
    name = { Sorted: "GroupAggregate", Hashed: "HashAggregate", Mixed: "MixedAggregate" }[n.Strategy] || "Aggregate";
    if (n["Partial Mode"] && n["Partial Mode"] !== "Simple") name = `${n["Partial Mode"]} ${name}`;
  } else if (name === "SetOp") {
    name = `${n.Strategy === "Hashed" ? "HashSetOp" : "SetOp"} ${n.Command}`;
  } else if (name === "Nested Loop" && join) {
    name += ` ${join} Join`;
  } else if ((name === "Hash Join" || name === "Merge Join") && join) {
    name = `${name.split(" ")[0]} ${join} Join`;
  } else if (name === "Custom Scan") {
    name += ` (${n["Custom Plan Provider"]})`;
  }
  if (n["Async Capable"]) name = "Async " + name;
  if (n["Parallel Aware"]) name = "Parallel " + name;
  if (n["Scan Direction"] === "Backward") name += " Backward";
  if (n["Index Name"]) name += n["Node Type"] === "Bitmap Index Scan" ? ` on ${quoteIdent(n["Index Name"])}` : ` using ${quoteIdent(n["Index Name"])}`;
  const object = n["Relation Name"] || n["Function Name"] || n["CTE Name"] || n["Tuplestore Name"];
  if (object || n.Alias) {
    name += " on";
    if (object) name += " " + quoteIdent(object);
    if (n.Alias && n.Alias !== object) name += " " + quoteIdent(n.Alias);
  }
  return name;
}

const f2 = (x) => Number(x).toFixed(2), f3 = (x) => Number(x).toFixed(3), f0 = (x) => Number(x).toFixed(0);

function buffers(n) {
  const parts = [];
  for (const [label, kinds] of [["shared", ["Hit", "Read", "Dirtied", "Written"]], ["local", ["Hit", "Read", "Dirtied", "Written"]], ["temp", ["Read", "Written"]]]) {
    const set = kinds.filter((k) => n[`${label[0].toUpperCase()}${label.slice(1)} ${k} Blocks`] > 0)
      .map((k) => `${k.toLowerCase()}=${n[`${label[0].toUpperCase()}${label.slice(1)} ${k} Blocks`]}`);
    if (set.length) parts.push(`${label} ${set.join(" ")}`);
  }
  return parts.length ? "Buffers: " + parts.join(", ") : "";
}

// details are a node's lines under its header, in explain.c's order for the common nodes.
function details(n) {
  const out = [];
  const put = (k) => {
    if (n[k] !== undefined && !(k.startsWith("Rows Removed") && n[k] === 0)) out.push(`${k}: ${Array.isArray(n[k]) ? n[k].join(", ") : n[k]}`);
  };
  ["Group Key", "Sort Key", "Presorted Key", "Order", "Index Cond", "Recheck Cond", "Rows Removed by Index Recheck", "Order By",
    "Merge Cond", "Hash Cond", "Join Filter", "Rows Removed by Join Filter", "One-Time Filter", "Filter"].forEach(put);
  if (n["HashAgg Batches"] !== undefined) {
    out.push(`Batches: ${n["HashAgg Batches"]}  Memory Usage: ${n["Peak Memory Usage"]}kB` + (n["Disk Usage"] ? `  Disk Usage: ${n["Disk Usage"]}kB` : ""));
  }
  ["Rows Removed by Filter", "Heap Fetches"].forEach(put);
  if (n["Exact Heap Blocks"] || n["Lossy Heap Blocks"]) {
    out.push("Heap Blocks:" + (n["Exact Heap Blocks"] ? ` exact=${n["Exact Heap Blocks"]}` : "") + (n["Lossy Heap Blocks"] ? ` lossy=${n["Lossy Heap Blocks"]}` : ""));
  }
  ["Workers Planned", "Workers Launched"].forEach(put);
  if (n["Sort Method"]) out.push(`Sort Method: ${n["Sort Method"]}  ${n["Sort Space Type"]}: ${n["Sort Space Used"]}kB`);
  if (n["Hash Buckets"] !== undefined) {
    const orig = (k) => (n[`Original ${k}`] !== n[k] ? ` (originally ${n[`Original ${k}`]})` : "");
    out.push(`Buckets: ${n["Hash Buckets"]}${orig("Hash Buckets")}  Batches: ${n["Hash Batches"]}${orig("Hash Batches")}  Memory Usage: ${n["Peak Memory Usage"]}kB`);
  }
  ["Chunks excluded during startup", "Chunks excluded during runtime", "Hypertables excluded during runtime"].forEach(put);
  if (n["Subplans Removed"] > 0) put("Subplans Removed");
  const b = buffers(n);
  if (b) out.push(b);
  return out;
}

function planNode(n, indent, label, lines) {
  const pad = (i) => " ".repeat(2 * i);
  if (label) lines.push(pad(indent++) + label);
  let head = "";
  if (indent > 0) {
    head = pad(indent) + "->  ";
    indent += 2;
  }
  head += `${nodeName(n)}  (cost=${f2(n["Startup Cost"])}..${f2(n["Total Cost"])} rows=${f0(n["Plan Rows"])} width=${n["Plan Width"]})`;
  head += n["Actual Loops"] === 0 ? " (never executed)"
    : ` (actual time=${f3(n["Actual Startup Time"])}..${f3(n["Actual Total Time"])} rows=${f0(n["Actual Rows"])} loops=${n["Actual Loops"]})`;
  lines.push(head);
  indent++;
  for (const d of details(n)) lines.push(pad(indent) + d);
  for (const c of n.Plans || []) {
    const sub = c["Parent Relationship"] === "InitPlan" || c["Parent Relationship"] === "SubPlan";
    planNode(c, indent, sub ? c["Subplan Name"] : "", lines);
  }
}

function planAsText(explained) {
  const lines = [];
  planNode(explained.Plan, 0, "", lines);
  if (explained.Planning) {
    const b = buffers(explained.Planning);
    if (b) lines.push("Planning:", "  " + b);
  }
  if (explained["Planning Time"] !== undefined) lines.push(`Planning Time: ${f3(explained["Planning Time"])} ms`);
  if (explained["Execution Time"] !== undefined) lines.push(`Execution Time: ${f3(explained["Execution Time"])} ms`);
  return lines.join("\n");
}

// --- routing ---------------------------------------------------------------------------

async function route() {
  cleanup();
  cleanup = () => {};
  takeTokenFromFragment();
  const [path, query] = (location.hash.replace(/^#/, "") || "/devices").split("?");
  const params = new URLSearchParams(query || "");
  document.getElementById("logout").hidden = !token();
  if (!token()) return loginView(location.hash.startsWith("#/") ? location.hash : "#/devices");
  clearError();
  try {
    const account = await api("GET", "/api/v2.0/account");
    document.getElementById("account").textContent = account.name;
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    if (parts[0] === "devices" && parts.length === 2) return await deviceView(parts[1]);
    if (parts[0] === "variables" && parts.length === 2) return await variableView(parts[1], params);
    return await devicesView(params);
  } catch (e) {
    showError(e);
    if (e instanceof APIError && e.message.startsWith("The token")) show(el("p", {}, "No data: log in with a valid token."), el("a", { href: "#", on: { click: logout } }, "Log in again"));
  }
}

function logout(ev) {
  if (ev) ev.preventDefault();
  sessionStorage.removeItem(TOKEN);
  location.hash = "#/devices";
  route();
}

document.getElementById("logout").addEventListener("click", logout);
window.addEventListener("hashchange", route);
route();
