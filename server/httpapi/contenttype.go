package httpapi

import (
	"bytes"
	"fmt"
	"mime"
	"strings"

	"github.com/valyala/fasthttp"
)

// CheckJSONType is the answer to a request whose body is not declared
// JSON (spec §1.5, §4.1: application/json, UTF-8): 400 BAD_REQUEST (spec
// §7 maps the code to 400 and no other status, so not 415 Unsupported
// Media Type), details.issues naming Content-Type. Nil when the
// Content-Type is application/json, with no parameter or one charset of
// utf-8 (RFC 8259 §8.1: JSON is UTF-8), in any case; and nil when there
// is none, which declares no other type (clients such as Go's net/http
// send none unless told). text/plain, forms (curl -d sends
// application/x-www-form-urlencoded), XML and charset=utf-16 are refused.
func CheckJSONType(h *fasthttp.RequestHeader) *APIError {
	ct := h.ContentType()
	if len(ct) == 0 || plainJSON(ct) {
		return nil
	}
	mt, params, err := mime.ParseMediaType(string(ct))
	if err == nil && mt == "application/json" {
		cs, ok := params["charset"]
		if len(params) == 0 || len(params) == 1 && ok && strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	return &APIError{Code: CodeBadRequest,
		Message: "the body must be JSON: send Content-Type: application/json",
		Details: map[string]any{"issues": []Issue{{Path: "Content-Type",
			Message: fmt.Sprintf("must be application/json (optionally with charset=utf-8), not %q", ct)}}}}
}

// plainJSON says whether ct is one of the two spellings nearly every
// client sends, "application/json" and "application/json; charset=utf-8"
// (in any case): those are accepted without mime.ParseMediaType, which
// allocates a map for every request.
func plainJSON(ct []byte) bool {
	return bytes.EqualFold(ct, jsonType) || bytes.EqualFold(ct, jsonUTF8Type)
}

var (
	jsonType     = []byte("application/json")
	jsonUTF8Type = []byte("application/json; charset=utf-8")
)

// RequireJSON answers 400 (CheckJSONType) and returns false when the
// request's body is not declared JSON.
func RequireJSON(ctx *fasthttp.RequestCtx) bool {
	if e := CheckJSONType(&ctx.Request.Header); e != nil {
		WriteError(ctx, e)
		return false
	}
	return true
}
