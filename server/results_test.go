package server

import (
	"strings"
	"testing"

	"github.com/verifyd/verifyd/server/httpapi"
)

// TestResultsQuery: GET /v1/results checks a parameter that is given even
// when it is empty: cursor= is a bad cursor (it was read as no cursor),
// limit= and kind= are bad values; a parameter given twice or unknown is
// refused; absent ones take their defaults.
func TestResultsQuery(t *testing.T) {
	e := startServer(t, nil)
	if r := e.do("POST", "/v1/validate", `{"email":"ann@shop.test"}`, e.bearer()...); r.status != 200 {
		t.Fatalf("validate: %d %s", r.status, r.body)
	}
	for q, path := range map[string]string{
		"cursor=":           "cursor",
		"cursor":            "cursor",
		"cursor=yesterday":  "cursor",
		"limit=":            "limit",
		"limit=0":           "limit",
		"kind=":             "kind",
		"kind=everything":   "kind",
		"limit=1&limit=2":   "limit",
		"cursor=&cursor=":   "cursor",
		"kind=all&kind=all": "kind",
		"limit=5&cursr=x":   "cursr",
		"cursor=2026-01-01T00:00:00Z&cursor=2026-01-02T00:00:00Z": "cursor",
	} {
		r := e.do("GET", "/v1/results?"+q, "", e.bearer()...)
		code, _, _ := r.errorEnvelope(t)
		if r.status != 400 || code != httpapi.CodeBadRequest || !strings.Contains(string(r.body), `"path":"`+path+`"`) {
			t.Errorf("?%s: %d %s, want 400 naming %s", q, r.status, r.body, path)
		}
	}
	for _, q := range []string{"", "?limit=1", "?kind=single", "?cursor=2999-01-01T00:00:00.000Z&kind=all&limit=200"} {
		r := e.do("GET", "/v1/results"+q, "", e.bearer()...)
		if r.status != 200 || !strings.Contains(string(r.body), "ann@shop.test") {
			t.Errorf("%q: %d %s", q, r.status, r.body)
		}
	}
}
