package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/verifyd/verifyd/server/httpapi"
)

// TestIdemKeyHeader: an Idempotency-Key sent on two header lines (equal
// or not, in any case) answers 400 in the envelope naming it, records
// nothing and charges nothing; before, the first line was taken
// silently. One line of 8 to 128 characters is the key.
func TestIdemKeyHeader(t *testing.T) {
	e := startServer(t, nil)
	body := `{"email":"ann@shop.test"}`
	balance := func() string {
		t.Helper()
		return string(e.do("GET", "/v1/balance", "", e.bearer()...).body)
	}
	for _, hdr := range [][]string{
		{"Idempotency-Key", "order-0001", "Idempotency-Key", "order-0002"},
		{"Idempotency-Key", "order-0001", "Idempotency-Key", "order-0001"},
		{"Idempotency-Key", "order-0001", "Idempotency-Key", "order-0002", "Idempotency-Key", "order-0003"},
		{"Idempotency-Key", "short"},
	} {
		before := balance()
		r := e.do("POST", "/v1/validate", body, append(e.bearer(), hdr...)...)
		code, _, d := r.errorEnvelope(t)
		if r.status != 400 || code != httpapi.CodeBadRequest || !strings.Contains(string(r.body), `"path":"Idempotency-Key"`) {
			t.Errorf("%q: %d %s, want 400 naming Idempotency-Key", hdr, r.status, r.body)
		}
		if d["issues"] == nil {
			t.Errorf("%q: no details.issues", hdr)
		}
		if after := balance(); after != before {
			t.Errorf("%q: balance %s, then %s", hdr, before, after)
		}
	}
	// Names are case-insensitive: two lines however spelt are two keys.
	r := e.raw("POST /v1/validate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + e.key + "\r\nContent-Type: application/json\r\n" +
		"Idempotency-Key: order-0001\r\nidempotency-KEY: order-0004\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	if code, _, _ := r.errorEnvelope(t); r.status != 400 || code != httpapi.CodeBadRequest || !strings.Contains(string(r.body), `"path":"Idempotency-Key"`) {
		t.Errorf("two keys spelt differently: %d %s", r.status, r.body)
	}
	// Nothing was recorded under order-0001: it is a first request now,
	// and its repeat a replay.
	first := e.do("POST", "/v1/validate", body, append(e.bearer(), "Idempotency-Key", "order-0001")...)
	again := e.do("POST", "/v1/validate", body, append(e.bearer(), "Idempotency-Key", "order-0001")...)
	if first.status != 200 || first.header.Get("Idempotent-Replay") != "" || again.status != 200 || again.header.Get("Idempotent-Replay") != "true" {
		t.Errorf("one key: %d %v, then %d %v", first.status, first.header, again.status, again.header)
	}
}
