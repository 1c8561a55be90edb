package events

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sensordata/sensorapi/pkg/validate"
)

// Webhook is the action type of an HTTP request to a URL, signed with the event's
// secret (X-Signature).
const Webhook = "webhook"

func init() { registerAction(Webhook, 1, func() actionType { return &webhookAction{} }) }

// Limits of a webhook.
const (
	maxURL     = 2000
	maxHeaders = 20
)

// reservedHeaders are set by the delivery itself.
var reservedHeaders = []string{"x-event-delivery", "x-signature", "host", "content-length", "transfer-encoding", "connection"}

// webhookAction is a webhook's fields.
type webhookAction struct {
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

func (w *webhookAction) read(ctx context.Context, env readEnv, o *validate.Object) {
	o.Require("url")
	if u, ok := o.String("url", maxURL); ok {
		if msg := checkURL(ctx, u, env.allowPrivate); msg != "" {
			o.Fail("url", msg)
		}
		w.URL = u
	}
	w.Method = "POST"
	if m, ok := o.String("method", 0); ok {
		if m = strings.ToUpper(m); m != "POST" && m != "PUT" && m != "GET" {
			o.Fail("method", `Choose one of "POST", "PUT", "GET".`)
		}
		w.Method = m
	}
	w.Headers = readHeaders(o)
	w.Body = template(o, "body", false)
}

func (w *webhookAction) fields() map[string]any {
	h := w.Headers
	if h == nil {
		h = map[string]string{}
	}
	return map[string]any{"url": w.URL, "method": w.Method, "headers": h, "body": w.Body}
}

func (w *webhookAction) render(v Vars) actionType {
	r := *w
	if w.Method != "GET" {
		r.Body = Render(w.Body, v)
		if w.Body == "" {
			r.Body = defaultBody(v)
		}
	}
	if len(w.Headers) > 0 {
		r.Headers = make(map[string]string, len(w.Headers))
		for k, h := range w.Headers {
			r.Headers[k] = Render(h, v)
		}
	}
	return &r
}

func (*webhookAction) writes() (string, string) { return "", "" }

// defaultBody is a webhook's body when its template is empty.
func defaultBody(v Vars) string {
	b, _ := json.Marshal(map[string]any{"event": v.Event, "state": v.State, "value": v.Value,
		"timestamp": v.Timestamp, "device": v.Device, "variable": v.Variable})
	return string(b)
}

// run sends one attempt of a webhook: 2xx is delivered.
func (w *webhookAction) run(ctx context.Context, s *Service, at attempt) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	body := []byte(w.Body)
	var r io.Reader
	if w.Method != "GET" {
		r = bytes.NewReader(body)
	} else {
		body = nil
	}
	hr, err := http.NewRequestWithContext(ctx, w.Method, w.URL, r)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errPermanent, err)
	}
	for k, v := range w.Headers {
		hr.Header.Set(k, v)
	}
	if w.Method != "GET" && hr.Header.Get("Content-Type") == "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("User-Agent", "sensorapi-events/1")
	hr.Header.Set("X-Event-Delivery", at.delivery)
	hr.Header.Set("X-Event-Attempt", strconv.Itoa(at.number))
	hr.Header.Set("X-Signature", Sign(at.secret, body))
	resp, err := s.http.Do(hr)
	if err != nil {
		if errors.Is(err, errBlocked) {
			return 0, fmt.Errorf("%w: %w", errPermanent, err)
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// Sign is the X-Signature of a body: sha256=<hex HMAC-SHA256 with the secret>.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// readHeaders reads a webhook's headers: an object of strings (templates).
func readHeaders(o *validate.Object) map[string]string {
	h, ok := o.Object("headers")
	if !ok {
		return map[string]string{}
	}
	if len(h.Raw) > maxHeaders {
		o.Fail("headers", fmt.Sprintf("Ensure this object has no more than %d headers.", maxHeaders))
		return nil
	}
	out := make(map[string]string, len(h.Raw))
	for k := range h.Raw {
		if !validHeaderName(k) || slices.Contains(reservedHeaders, strings.ToLower(k)) {
			h.Fail(k, "This header name is invalid or set by the delivery itself.")
			continue
		}
		v := template(h, k, false)
		if strings.ContainsAny(v, "\r\n") {
			h.Fail(k, "Header values may not contain line breaks.")
		}
		out[k] = v
	}
	return out
}

// validHeaderName tells whether s is an HTTP token.
func validHeaderName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !tokenChar(r) {
			return false
		}
	}
	return true
}

// tokenChar tells whether r may appear in a header name here.
func tokenChar(r rune) bool {
	return r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}
