// Package httpapi is the leaf HTTP kit every front end of verifyd shares:
// the error envelope of spec §7, strict request decoding, the rate
// limits of spec §8, the authentication guard of the /v1 routes (API keys
// and browser sessions) and the one idempotency middleware of spec §7.3.
// The /v1 handlers (package server) and the dashboard and /auth/*
// (server/web) build on it; of server/ it imports only server/conns.
package httpapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/storage"
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
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// WriteError answers ctx with the error envelope, with the code's own
// status of spec §7 and no other: a client may switch on either. A
// request the enumeration has no closer code for (a head too large, one
// cut off, a body not declared JSON, a method the path does not take) is
// a BAD_REQUEST and so a 400; a failure that may pass (a full disk) is
// an INTERNAL and so a 500, with Retry-After. A code outside the
// enumeration is a programming error and answers INTERNAL.
func WriteError(ctx *fasthttp.RequestCtx, e *APIError) {
	status, ok := statusOf[e.Code]
	if !ok {
		e = &APIError{Code: CodeInternal, Message: "internal error"}
		status = fasthttp.StatusInternalServerError
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

// WriteInternal answers a request that failed on err: 500 INTERNAL (its
// deadline passed, GuardOptions.RequestTimeout, too: retried with its
// Idempotency-Key it is answered once). When the store refuses writes
// because its disk is full (storage.NoSpace) the 500 says so, with
// Retry-After and details.retryAfter: nothing was written or charged, and
// the same request goes through once space is freed. The message never
// carries err's text.
func WriteInternal(ctx *fasthttp.RequestCtx, err error) {
	if storage.NoSpace(err) {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(noSpaceRetry))
		WriteError(ctx, &APIError{Code: CodeInternal,
			Message: "the server's storage is full: nothing was charged; retry later with the same Idempotency-Key",
			Details: map[string]any{"retryAfter": noSpaceRetry}})
		return
	}
	WriteError(ctx, &APIError{Code: CodeInternal, Message: InternalMessage(ctx)})
}

// InternalMessage is the message of a 500: a write is safe to retry with
// its Idempotency-Key (spec §7), a read simply safe to retry (a key means
// nothing to a GET).
func InternalMessage(ctx *fasthttp.RequestCtx) string {
	if ctx.IsGet() || ctx.IsHead() {
		return "internal error; safe to retry"
	}
	return "internal error; safe to retry with the same Idempotency-Key"
}

// noSpaceRetry is the Retry-After, in seconds, of a 500 for a full disk.
const noSpaceRetry = 30

// BodyTooLarge is the answer to a request body over its route's limit of
// max bytes; details.maxBodyBytes names the limit.
func BodyTooLarge(max int) *APIError {
	return &APIError{Code: CodeBadRequest, Message: fmt.Sprintf("request body exceeds the limit of %d bytes", max),
		Details: map[string]any{"maxBodyBytes": max}}
}

// BadRequest is a 400 for a request body's problems: details.issues
// lists them.
func BadRequest(msg string, issues []Issue) *APIError {
	return &APIError{Code: CodeBadRequest, Message: msg, Details: map[string]any{"issues": issues}}
}

// RateLimited answers 429 RATE_LIMITED with Retry-After and
// details.retryAfter, the whole seconds of wait rounded up.
func RateLimited(ctx *fasthttp.RequestCtx, wait time.Duration) {
	secs := retryAfterSeconds(wait)
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(secs))
	WriteError(ctx, &APIError{Code: CodeRateLimited,
		Message: "rate limit exceeded; retry in " + strconv.Itoa(secs) + " s",
		Details: map[string]any{"retryAfter": secs}})
}

// WriteJSON answers status with v as JSON.
func WriteJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(ctx, &APIError{Code: CodeInternal, Message: "internal error"})
		return
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}
