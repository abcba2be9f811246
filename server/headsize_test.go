package server

import (
	"strings"
	"testing"

	"github.com/verifyd/verifyd/server/httpapi"
)

// TestHeadSize: a 5,000-byte Cookie (a dashboard sharing its host with
// other applications' cookies) is served: fasthttp's default 4 KiB read
// buffer answered a bare 400 to any head over 4 KiB. A head over
// MaxHeaderBytes answers 400 BAD_REQUEST in the envelope (spec §7: not RFC 6585's 431) with details.maxHeaderBytes.
func TestHeadSize(t *testing.T) {
	e := startServer(t, nil)
	cookie := "other_app=" + strings.Repeat("c", 4990)
	if r := e.do("GET", "/v1/balance", "", append(e.bearer(), "Cookie", cookie)...); r.status != 200 {
		t.Errorf("GET /v1/balance with a 5,000-byte Cookie: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/validate", `{"email":"ann@shop.test"}`, append(e.bearer(), "Cookie", cookie)...); r.status != 200 {
		t.Errorf("POST /v1/validate with a 5,000-byte Cookie: %d %s", r.status, r.body)
	}
	// 12 KiB of headers still fit in the default 16 KiB.
	if r := e.do("GET", "/v1/balance", "", append(e.bearer(), "Cookie", cookie, "X-Extra", strings.Repeat("x", 7000))...); r.status != 200 {
		t.Errorf("a 12 KiB head: %d %s", r.status, r.body)
	}
	for name, req := range map[string]string{
		"40 KiB header": "GET /v1/balance HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + e.key + "\r\nCookie: " + strings.Repeat("c", 40<<10) + "\r\n\r\n",
		"20 KiB URL":    "GET /v1/results?cursor=" + strings.Repeat("1", 20<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"40 KiB POST":   "POST /v1/validate HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("p", 40<<10) + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	} {
		r := e.raw(req)
		code, _, d := r.errorEnvelope(t)
		if r.status != 400 || code != httpapi.CodeBadRequest || d["maxHeaderBytes"] != float64(DefaultMaxHeaderBytes) {
			t.Errorf("%s: %d %s, want 400 with maxHeaderBytes %d", name, r.status, r.body, DefaultMaxHeaderBytes)
		}
	}
	// The limit is an option.
	e = startServer(t, func(o *Options) { o.MaxHeaderBytes = 64 << 10 })
	if r := e.do("GET", "/v1/balance", "", append(e.bearer(), "Cookie", strings.Repeat("c", 40<<10))...); r.status != 200 {
		t.Errorf("a 40 KiB head under a 64 KiB limit: %d %s", r.status, r.body)
	}
}
