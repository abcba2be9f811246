package server

import (
	"encoding/json"

	"github.com/valyala/fasthttp"
)

// Error codes of spec §2.3 and §7; the code is the stable identifier, the
// message is for people.
const (
	CodeBadRequest   = "BAD_REQUEST"
	CodeUnauthorized = "UNAUTHORIZED"
	CodeForbidden    = "FORBIDDEN"
	CodeNotFound     = "NOT_FOUND"
	CodeConflict     = "CONFLICT"
	CodeRateLimited  = "RATE_LIMITED"
	CodeInternal     = "INTERNAL"
)

// statusOf maps an error code to its HTTP status (spec §7).
var statusOf = map[string]int{
	CodeBadRequest:   fasthttp.StatusBadRequest,
	CodeUnauthorized: fasthttp.StatusUnauthorized,
	CodeForbidden:    fasthttp.StatusForbidden,
	CodeNotFound:     fasthttp.StatusNotFound,
	CodeConflict:     fasthttp.StatusConflict,
	CodeRateLimited:  fasthttp.StatusTooManyRequests,
	CodeInternal:     fasthttp.StatusInternalServerError,
}

// APIError is an error answered to the client in the envelope of spec §2.11.
type APIError struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// Status is the HTTP status when it is not the code's own: spec §7's
	// enumeration has no code for 408, 415 or 431, which answer
	// BAD_REQUEST, the closest. Zero means the code's status.
	Status int `json:"-"`
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// WriteError answers ctx with the error envelope, for the routes other
// parts of verifyd add (batch jobs). A code outside the enumeration is a
// programming error and answers INTERNAL.
func WriteError(ctx *fasthttp.RequestCtx, e *APIError) { writeError(ctx, e) }

// writeError answers ctx with the error envelope. A code outside the
// enumeration is a programming error and answers INTERNAL.
func writeError(ctx *fasthttp.RequestCtx, e *APIError) {
	status, ok := statusOf[e.Code]
	if !ok {
		e = &APIError{Code: CodeInternal, Message: "internal error"}
		status = fasthttp.StatusInternalServerError
	} else if e.Status != 0 {
		status = e.Status
	}
	b, err := json.Marshal(struct {
		Error *APIError `json:"error"`
	}{e})
	if err != nil {
		b = []byte(`{"error":{"code":"INTERNAL","message":"internal error"}}`)
		status = fasthttp.StatusInternalServerError
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}
