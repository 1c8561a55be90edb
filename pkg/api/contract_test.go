package api_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/sensordata/sensorapi/pkg/openapi"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// contractBodyLimit is the body limit of the contract's server: small, so that the 413
// of each operation costs little.
const contractBodyLimit = 16 << 10

// TestOpenAPIContract sends a representative set of requests, every documented
// operation's success and, per operation, each error it documents that a request can
// cause (400, 401, 403, 404, 413, 415, 423, 429; 405 on every path), and has two
// validators written apart from each other check every exchange against
// docs/openapi.yaml: kin-openapi (pkg/openapi, as in every test) on requests sent
// straight to the server, and Prism, the proxy spec-driven tools use, in front of it.
// Prism's side runs when node and Prism are installed (.ci/node-tools) and is skipped,
// saying so, otherwise.
func TestOpenAPIContract(t *testing.T) {
	doc, err := openapi.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ops := operationsByID(doc)
	t.Run("kin-openapi", func(t *testing.T) {
		run := newContractRun(t, ops, false)
		run.all(t, doc)
	})
	t.Run("prism", func(t *testing.T) {
		findPrism(t)
		run := newContractRun(t, ops, true)
		run.all(t, doc)
	})
}

// docOp is one operation of the document.
type docOp struct {
	method, path string // the path as the document spells it
	op           *openapi3.Operation
}

func operationsByID(doc *openapi3.T) map[string]docOp {
	ops := map[string]docOp{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[op.OperationID] = docOp{method: method, path: path, op: op}
		}
	}
	return ops
}

func (o docOp) documents(status int) bool { return o.op.Responses.Status(status) != nil }

// jsonAnswer tells whether the answer with status has a JSON schema a body is checked
// against.
func (o docOp) jsonAnswer(status int) bool {
	r := o.op.Responses.Status(status)
	if r == nil || r.Value == nil {
		return false
	}
	mt := r.Value.Content.Get("application/json")
	return mt != nil && mt.Schema != nil
}

// jsonRequest tells whether the operation's request body has a JSON schema (Prism
// cannot check a CSV or NDJSON body against its string schema: no request canary).
func (o docOp) jsonRequest() bool {
	if o.op.RequestBody == nil || o.op.RequestBody.Value == nil {
		return false
	}
	mt := o.op.RequestBody.Value.Content.Get("application/json")
	return mt != nil && mt.Schema != nil
}

// url fills the path's parameters and adds the query.
func (o docOp) url(params map[string]string, query string) string {
	p := o.path
	for name, value := range params {
		p = strings.ReplaceAll(p, "{"+name+"}", value)
	}
	if query != "" {
		p += "?" + query
	}
	return p
}

// contractCase is an operation's request that succeeds (or, when want is not 2xx, one
// that fails as it must), with the path parameters that make it fail with 404.
type contractCase struct {
	op       string            // operationId
	params   map[string]string // path parameters
	query    string
	body     any      // nil: none; a string is sent as it is
	header   []string // e.g. another Content-Type than JSON's
	want     int
	missing  map[string]string // parameters naming nothing: 404 (nil: no such case)
	upstream string            // "limited": the rate-limited server
}

// exchange is one request of the contract and the status it must get.
type exchange struct {
	name         string
	op           *docOp // nil: a path or method the document does not have
	method, path string
	token        string
	body         any
	header       []string
	want         int
	upstream     string
	success      bool // the case's own request, not an error derived from it
	unparsable   bool // the body is not JSON
}

// expand turns a case into its requests: first the errors its operation documents that
// a variation of the request causes, then the request itself.
func expand(c contractCase, o docOp, fullToken, otherDeviceToken string) []exchange {
	base := exchange{name: c.op, op: &o, method: o.method, path: o.url(c.params, c.query), token: fullToken,
		body: c.body, header: c.header, want: c.want, upstream: c.upstream}
	if c.want < 200 || c.want > 299 || c.upstream != "" {
		return []exchange{base} // the rate-limited server counts every request
	}
	var xs []exchange
	variant := func(name string, status int, edit func(*exchange)) {
		x := base
		x.name, x.want = c.op+" "+name, status
		edit(&x)
		xs = append(xs, x)
	}
	if o.documents(http.StatusUnauthorized) {
		variant("without a token", http.StatusUnauthorized, func(x *exchange) { x.token = "" })
	}
	if o.documents(http.StatusForbidden) {
		variant("with another device's token", http.StatusForbidden, func(x *exchange) { x.token = otherDeviceToken })
	}
	if c.missing != nil {
		params := map[string]string{}
		maps.Copy(params, c.params)
		maps.Copy(params, c.missing)
		variant("of nothing", http.StatusNotFound, func(x *exchange) { x.path = o.url(params, c.query) })
	}
	if c.body != nil && o.documents(http.StatusBadRequest) {
		variant("with malformed JSON", http.StatusBadRequest, func(x *exchange) { x.body, x.unparsable = "{", true })
		variant("with a JSON string", http.StatusBadRequest, func(x *exchange) { x.body = `"contract"` })
	}
	if c.body != nil && o.documents(http.StatusUnsupportedMediaType) {
		variant("as text/plain", http.StatusUnsupportedMediaType, func(x *exchange) { x.header = []string{"Content-Type", "text/plain"} })
	}
	if o.documents(http.StatusRequestEntityTooLarge) {
		variant("over the body limit", http.StatusRequestEntityTooLarge, func(x *exchange) {
			x.body = map[string]string{"x": strings.Repeat("x", contractBodyLimit)} // JSON, which Prism forwards
		})
	}
	base.success = true
	return append(xs, base)
}

// undocumented are requests outside the document: a method each path does not serve
// (405) and an unknown path (404). kin-openapi checks their bodies against the error
// schemas; Prism has nothing to check them against.
func undocumented(doc *openapi3.T, token string) []exchange {
	filler := strings.NewReplacer("{", "x", "}", "")
	var xs []exchange
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for _, m := range []string{"PUT", "PATCH", "DELETE", "POST", "GET"} {
			if item.GetOperation(m) == nil {
				xs = append(xs, exchange{name: m + " " + path, method: m, path: filler.Replace(path), token: token,
					want: http.StatusMethodNotAllowed})
				break
			}
		}
	}
	return append(xs, exchange{name: "unknown path", method: "GET", path: "/api/v2.0/nowhere/", token: token,
		want: http.StatusNotFound})
}

// contractRun is one pass of the contract against servers of its own.
type contractRun struct {
	ops      map[string]docOp
	fix      contractFixture
	clients  map[string]*testenv.Client // by upstream: the servers, or Prism in front of them
	viaPrism bool
}

func newContractRun(t *testing.T, ops map[string]docOp, viaPrism bool) *contractRun {
	cfg := env.Config()
	cfg.MaxBodyBytes, cfg.ImportMaxBytes = contractBodyLimit, contractBodyLimit
	main := env.ClientWith(t, cfg)
	cfg.RateLimit, cfg.RateBurst = 1e-6, 1 // one request, then 429 for days
	limited := env.ClientWith(t, cfg)
	run := &contractRun{ops: ops, fix: newContractFixture(t, main), viaPrism: viaPrism,
		clients: map[string]*testenv.Client{"": main, "limited": limited}}
	if viaPrism {
		prism := *main
		prism.URL = startPrism(t, contractSwitch(t, map[string]string{"": main.URL, "limited": limited.URL}))
		run.clients = map[string]*testenv.Client{"": &prism, "limited": &prism}
	}
	return run
}

// all sends every request of the contract, in order (later cases delete what earlier
// ones created), after checking that every operation has a case.
func (r *contractRun) all(t *testing.T, doc *openapi3.T) {
	cases := contractCases(r.fix)
	r.checkCoverage(t, cases)
	xs := undocumented(doc, r.fix.full)
	for _, c := range cases {
		xs = append(xs, expand(c, r.ops[c.op], r.fix.full, r.fix.otherDevice)...)
	}
	if r.viaPrism {
		xs = slices.DeleteFunc(xs, func(x exchange) bool { return x.unparsable })
		t.Log("malformed JSON bodies are left to kin-openapi: Prism answers a body it cannot parse itself, without forwarding it")
	}
	for _, x := range xs {
		t.Run(x.name, func(t *testing.T) { r.check(t, x) })
	}
}

// checkCoverage fails for an operation without a succeeding case, and a case of no
// operation.
func (r *contractRun) checkCoverage(t *testing.T, cases []contractCase) {
	t.Helper()
	succeeds := map[string]bool{}
	for _, c := range cases {
		if _, ok := r.ops[c.op]; !ok {
			t.Fatalf("case of %q: no such operation in docs/openapi.yaml", c.op)
		}
		succeeds[c.op] = succeeds[c.op] || c.want >= 200 && c.want <= 299
	}
	for id, o := range r.ops {
		if !succeeds[id] {
			t.Errorf("%s %s (%s) has no contract case that succeeds", o.method, o.path, id)
		}
	}
}

// check sends x and checks its status; kin-openapi checks the exchange as the client
// sends it (testenv). Through Prism, Prism's verdict is checked too, and a canary shows
// that it checked this operation's schemas at all.
func (r *contractRun) check(t *testing.T, x exchange) {
	resp := r.send(t, x)
	if resp.Status != x.want {
		t.Fatalf("%s %s → %d, want %d: %.300s", x.method, x.path, resp.Status, x.want, resp.Body)
	}
	switch {
	case r.viaPrism && x.op != nil:
		checkPrismVerdict(t, x, resp.Header)
		r.canary(t, x)
	case !r.viaPrism && x.success && x.method == "GET":
		r.otherSpelling(t, x)
	}
}

func (r *contractRun) send(t *testing.T, x exchange) testenv.Response {
	header := x.header
	if r.viaPrism {
		header = append(slices.Clone(header), upstreamHeader, x.upstream)
	}
	return r.clients[x.upstream].In(t).As(x.token).Do(x.method, x.path, x.body, header...)
}

// otherSpelling: the path with or without the trailing slash the document spells it
// with answers the same (API.md: every route answers both, without a redirect).
func (r *contractRun) otherSpelling(t *testing.T, x exchange) {
	path, query, _ := strings.Cut(x.path, "?")
	if strings.HasSuffix(path, "/") {
		path = strings.TrimSuffix(path, "/")
	} else {
		path += "/"
	}
	if query != "" {
		path += "?" + query
	}
	if got := r.clients[x.upstream].In(t).As(x.token).Get(path); got.Status != x.want {
		t.Errorf("GET %s → %d, but %s → %d", path, got.Status, x.path, x.want)
	}
}

// checkPrismVerdict fails on what Prism found wrong: anything when the server accepted
// the request (a request the document refuses, or an answer it does not describe), and
// the answer or a path it could not route otherwise (the request is wrong on purpose).
func checkPrismVerdict(t *testing.T, x exchange, h http.Header) {
	t.Helper()
	vs, err := violations(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if x.success || v.in("response") || v.Message == "Selected route not found" {
			t.Errorf("prism: %s %s → %d: %v %s: %s", x.method, x.path, x.want, v.Location, v.Severity, v.Message)
		}
	}
}

// canary sends x again through Prism, answered this time by the switch with x's status
// and a body no schema accepts, and with a request body no schema accepts when x has
// one: Prism must report both. It fails to compile some schemas and then checks nothing
// against them, silently.
func (r *contractRun) canary(t *testing.T, x exchange) {
	t.Helper()
	wantAnswer := x.op.jsonAnswer(x.want)
	wantRequest := x.success && x.body != nil && x.op.jsonRequest()
	if !wantAnswer && !wantRequest {
		return
	}
	body := x.body
	if wantRequest {
		body = `"contract canary"`
	}
	var rd io.Reader
	if body != nil {
		b, ok := body.(string)
		if !ok {
			j, _ := json.Marshal(body)
			b = string(j)
		}
		rd = strings.NewReader(b)
	}
	req, err := http.NewRequest(x.method, r.clients[x.upstream].URL+x.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(x.header); i += 2 {
		req.Header.Set(x.header[i], x.header[i+1])
	}
	if x.token != "" {
		req.Header.Set("X-Auth-Token", x.token)
	}
	req.Header.Set(canaryHeader, strconv.Itoa(x.want))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("canary: %v", err)
	}
	_ = resp.Body.Close()
	vs, err := violations(resp.Header)
	if err != nil {
		t.Fatal(err)
	}
	if wantAnswer && !slices.ContainsFunc(vs, func(v violation) bool { return v.in("response", "body") }) {
		t.Errorf("prism let a %d answer of %s %s with the body %s pass: it does not check that answer (violations %v)",
			x.want, x.method, x.op.path, canaryBody, vs)
	}
	if wantRequest && !slices.ContainsFunc(vs, func(v violation) bool { return v.in("request", "body") }) {
		t.Errorf("prism let the request body %s of %s %s pass: it does not check that request (violations %v)",
			body, x.method, x.op.path, vs)
	}
}
