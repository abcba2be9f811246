package server

import (
	"strings"
	"testing"

	"github.com/verifyd/verifyd/server/httpapi"
)

// TestValidateContentType: POST /v1/validate reads a body declared JSON
// only (or undeclared); any other type answers 400 BAD_REQUEST in the envelope,
// after authentication, before idempotency, and charges nothing.
func TestValidateContentType(t *testing.T) {
	e := startServer(t, nil)
	body := `{"email":"ann@shop.test"}`
	validate := func(ct string, hdr ...string) reply {
		t.Helper()
		return e.do("POST", "/v1/validate", body, append(append(e.bearer(), "Content-Type", ct), hdr...)...)
	}
	balance := func() string {
		t.Helper()
		return string(e.do("GET", "/v1/balance", "", e.bearer()...).body)
	}
	for _, ct := range []string{"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=xyz", "application/xml", "text/xml", "application/json; charset=utf-16",
		"application/json; charset=UTF-16LE", "application/json;charset=utf-8;v=2", "application/octet-stream"} {
		before := balance()
		r := validate(ct)
		code, msg, d := r.errorEnvelope(t)
		is, _ := d["issues"].([]any)
		first, _ := func() (map[string]any, bool) {
			if len(is) == 0 {
				return nil, false
			}
			m, ok := is[0].(map[string]any)
			return m, ok
		}()
		if r.status != 400 || code != httpapi.CodeBadRequest || !strings.Contains(msg, "application/json") || first["path"] != "Content-Type" {
			t.Errorf("%q: %d %s, want 400 BAD_REQUEST naming Content-Type", ct, r.status, r.body)
		}
		if after := balance(); after != before {
			t.Errorf("%q: balance %s, then %s", ct, before, after)
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "APPLICATION/JSON; CHARSET=UTF-8", ""} {
		if r := validate(ct); r.status != 200 {
			t.Errorf("%q: %d %s, want 200", ct, r.status, r.body)
		}
	}
	// Authentication first: without a key, 401 whatever the type.
	if r := e.do("POST", "/v1/validate", body, "Content-Type", "text/plain"); r.status != 401 {
		t.Errorf("no key, text/plain: %d %s", r.status, r.body)
	}
	// A refused Content-Type is not recorded for the Idempotency-Key: the same key with
	// the body declared JSON is a first request.
	if r := validate("text/plain", "Idempotency-Key", "order-415-1"); r.status != 400 {
		t.Fatalf("text/plain with a key: %d %s", r.status, r.body)
	}
	if r := validate("application/json", "Idempotency-Key", "order-415-1"); r.status != 200 || r.header.Get("Idempotent-Replay") != "" {
		t.Errorf("the key again, as JSON: %d %v %s", r.status, r.header, r.body)
	}
}
