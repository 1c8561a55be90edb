package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Validator checks exchanges against the document. It is safe for concurrent use.
type Validator struct {
	doc       *openapi3.T
	router    routers.Router
	spelled   map[string]string // routed path (no trailing slash) → the document's path
	opts      *openapi3filter.Options
	validated atomic.Int64
	succeeded sync.Map // "METHOD /path" of operations that answered a valid 2xx
}

// Exchange is one request with the response it got; the bodies are passed apart
// because both readers have been consumed.
type Exchange struct {
	Request      *http.Request
	RequestBody  []byte
	Status       int
	Header       http.Header
	ResponseBody []byte

	// OffContract marks a request that is deliberately outside the document but that
	// the server tolerates (a malformed page number falls back to the default): only
	// the response is checked.
	OffContract bool
}

// The console's files are text the document describes as strings, and so are a
// history import's bodies (CSV or NDJSON, gzipped or not: read as they are sent).
func init() {
	for _, ct := range []string{"text/html", "text/javascript", "text/css", "text/csv", "application/x-ndjson"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
	}
}

// NewValidator loads the document and builds its router.
func NewValidator(ctx context.Context) (*Validator, error) {
	doc, err := Load(ctx)
	if err != nil {
		return nil, err
	}
	routed, spelled := routingDoc(doc)
	router, err := gorillamux.NewRouter(routed)
	if err != nil {
		return nil, fmt.Errorf("openapi: build the router: %w", err)
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true, // an undocumented status is a failure
		MultiError:            true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc, // the server checks tokens
	}
	return &Validator{doc: doc, router: router, spelled: spelled, opts: opts}, nil
}

// routingDoc returns a copy of doc to route requests with, and the spelling in doc of
// each of its paths. The copy has no servers, since the server under test listens
// anywhere; and its paths have no trailing slash: the document spells paths as the
// platform's clients do, the server answers both spellings, and requests are routed
// without the slash.
func routingDoc(doc *openapi3.T) (*openapi3.T, map[string]string) {
	routed := *doc
	routed.Servers = nil
	routed.Paths = openapi3.NewPaths()
	spelled := map[string]string{}
	for path, item := range doc.Paths.Map() {
		trimmed := trimPath(path)
		routed.Paths.Set(trimmed, item)
		spelled[trimmed] = path
	}
	return &routed, spelled
}

// Validated is how many responses have been checked so far.
func (v *Validator) Validated() int64 { return v.validated.Load() }

// Check validates the response, and the request too when the server accepted it (2xx):
// tests send deliberately broken requests, which the server must refuse, not the
// document describe. Unknown paths and methods are checked against the error schemas.
// Routing uses the decoded path, as Gin does, so an encoded slash splits segments.
func (v *Validator) Check(ctx context.Context, x Exchange) error {
	defer v.validated.Add(1)
	req := x.Request.Clone(ctx)
	req.URL.RawPath = ""
	req.URL.Path = trimPath(req.URL.Path) // every route answers with and without a trailing slash
	route, params, err := v.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return v.checkUnrouted(x, http.StatusNotFound)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return v.checkUnrouted(x, http.StatusMethodNotAllowed)
	case err != nil:
		return fmt.Errorf("find route: %w", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: v.opts}
	if x.Status >= 200 && x.Status < 300 && !x.OffContract {
		req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return fmt.Errorf("request: %w", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.Status,
		Header: x.Header, Body: io.NopCloser(bytes.NewReader(x.ResponseBody)), Options: v.opts}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	if x.Status >= 200 && x.Status < 300 {
		v.succeeded.Store(req.Method+" "+v.spelled[route.Path], true)
	}
	return nil
}

// Unexercised lists the documented operations ("METHOD /path") that no checked
// exchange answered with a 2xx, so the suite can require each success shape to have
// been compared with a real response.
func (v *Validator) Unexercised() []string {
	var out []string
	for path, item := range v.doc.Paths.Map() {
		for method := range item.Operations() {
			if _, ok := v.succeeded.Load(method + " " + path); !ok {
				out = append(out, method+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out
}

// unroutedSchemas are the answers to a path or method the document does not have: the
// body limit is enforced before routing, so an oversized body gets its 413 first.
var unroutedSchemas = map[int]string{
	http.StatusNotFound:              "NotFoundError",
	http.StatusMethodNotAllowed:      "MethodNotAllowedError",
	http.StatusRequestEntityTooLarge: "TooLargeError",
}

// checkUnrouted checks the answer to a path (want 404) or method (want 405) the
// document does not have.
func (v *Validator) checkUnrouted(x Exchange, want int) error {
	if x.Status != want && x.Status != http.StatusRequestEntityTooLarge {
		return fmt.Errorf("%s %s is not in the document, yet answered %d, not %d",
			x.Request.Method, x.Request.URL.Path, x.Status, want)
	}
	return v.CheckSchema(unroutedSchemas[x.Status], x.ResponseBody)
}

// CheckSchema validates a JSON body against a schema of components/schemas.
func (v *Validator) CheckSchema(name string, body []byte) error {
	ref := v.doc.Components.Schemas[name]
	if ref == nil {
		return fmt.Errorf("no schema %q in the document", name)
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return fmt.Errorf("%s body is not JSON: %w", name, err)
	}
	if err := ref.Value.VisitJSON(value); err != nil {
		return fmt.Errorf("%s body: %w", name, err)
	}
	return nil
}

// trimPath drops a path's trailing slashes, as the server does before routing.
func trimPath(p string) string {
	if len(p) > 1 {
		return strings.TrimRight(p, "/")
	}
	return p
}
