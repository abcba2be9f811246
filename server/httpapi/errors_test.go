package httpapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestInternalMessage: a 500 tells a write to retry with its
// Idempotency-Key (spec §7) and a read only to retry: a key means
// nothing to a GET. Neither carries the error's text.
func TestInternalMessage(t *testing.T) {
	for method, want := range map[string]string{
		"GET":    "internal error; safe to retry",
		"HEAD":   "internal error; safe to retry",
		"POST":   "internal error; safe to retry with the same Idempotency-Key",
		"DELETE": "internal error; safe to retry with the same Idempotency-Key",
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(method)
		WriteInternal(&ctx, errors.New("pq: secret table name"))
		if ctx.Response.StatusCode() != 500 {
			t.Errorf("%s: status %d", method, ctx.Response.StatusCode())
		}
		var env struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(ctx.Response.Body(), &env); err != nil {
			t.Fatalf("%s: %v %s", method, err, ctx.Response.Body())
		}
		if env.Error.Code != CodeInternal || env.Error.Message != want {
			t.Errorf("%s: %+v, want INTERNAL %q", method, env.Error, want)
		}
		if strings.Contains(string(ctx.Response.Body()), "secret") {
			t.Errorf("%s: the answer carries the error's text: %s", method, ctx.Response.Body())
		}
	}
}
