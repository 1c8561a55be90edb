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
  const copy = (pre) => el("button", { on: { click: () => navigator.clipboard.writeText(pre.textContent) } }, "copy");
  show(el("h2", {}, `${v.label} `, el("span", { class: "muted" }, v.name)), controls,
    el("div", { class: "split" }, chart, el("div", {},
      // a synthetic variable's values come from its expression (API.md §17)
      v.type === "synthetic" ? el("div", { class: "block" }, el("h3", {}, "Synthetic: computed from"),
        el("pre", { id: "expression" }, v.syntheticExpression)) : "",
      el("div", { class: "block" }, el("h3", {}, "SQL (as sensorapi compile prints it)", copy(sql)), sql),
      el("div", { class: "block" }, el("h3", {}, el("span", {}, "Plan, executed in ", exec, " ms"), copy(plan)), plan))));
  for (const c of controls.querySelectorAll("select, input")) c.addEventListener("change", () => load(id, chart, sql, plan, exec));
  await load(id, chart, sql, plan, exec);
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

async function load(id, chart, sql, plan, exec) {
  const req = body(id);
  const data = await api("POST", "/api/v1.6/data/stats/resample/", req).catch((e) => { showError(e); return null; });
  if (!data) return;
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
  if (!compiled) return;
  sql.textContent = compiled.psql;
  plan.textContent = JSON.stringify(analyzed.plan, null, 2);
  exec.textContent = analyzed.execution_ms.toFixed(2);
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
