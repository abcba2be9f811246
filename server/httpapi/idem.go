package httpapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/storage"
)

// Header names of spec §7.3.
const (
	HeaderIdemKey = "Idempotency-Key"
	HeaderReplay  = "Idempotent-Replay"
)

// idemReplays counts the answers replayed for an Idempotency-Key, on
// every route that takes one.
var idemReplays = metrics.NewCounter("verifyd_http_idempotent_replays_total")

// IdemStore is what the idempotency middleware reads and writes.
type IdemStore interface {
	BeginIdem(ctx context.Context, ref storage.IdemRef, requestHash []byte) (storage.IdemOutcome, storage.IdemRecord, error)
	CompleteIdem(ctx context.Context, ref storage.IdemRef, resp storage.IdemResponse) error
	AbortIdem(ctx context.Context, ref storage.IdemRef) error
}

// Idempotency is the one Idempotency-Key middleware (spec §7.3) of the
// routes that take a key: POST /v1/validate and POST /v1/batch.
type Idempotency struct {
	DB IdemStore
	// Wait bounds how long a concurrent duplicate waits for the first
	// request's answer before it answers 409; it should exceed the
	// longest a first request takes.
	Wait   time.Duration
	Logger *slog.Logger
}

// idemMargin is what a waiting duplicate keeps of its request's time to
// answer its 409.
const idemMargin = time.Second

// Idem is one request's Idempotency-Key: the record Begin made (Ref), or
// the key the store could not record (Lost), or neither (no key).
type Idem struct {
	d *Idempotency
	// ctx is the request's context: ending the record is bounded by the
	// request's deadline too. A record the request could not end (its
	// deadline passed, the store was away) is the store's to clean up:
	// postgres ends such strays from its heartbeat, and a retry of the
	// same key on this box takes it over at once.
	ctx context.Context
	// Ref is the record begun; the handler ends it: with its result's
	// write (storage.ChargeRequest.Idem, storage.JobSpec.Idem), Answer
	// or Abort.
	Ref *storage.IdemRef
	// Lost is the key and request hash BeginIdem could not record (the
	// store failed: fail-open, spec §7.3): a charge records it then
	// (storage.ChargeRequest.IdemHash), so that a retry of a charged
	// request replays it rather than charging again.
	Lost *LostKey
}

// LostKey is an Idempotency-Key BeginIdem could not record, and its
// request's hash.
type LostKey struct {
	Ref  storage.IdemRef
	Hash []byte
}

// Begin handles the Idempotency-Key header of a request of account to
// endpoint ("POST /v1/validate") with body: a bad key, or two, answer
// 400 (IdemKey); a replay answers the stored response with
// Idempotent-Replay: true; another body under the same key answers 409; a
// concurrent duplicate waits for the first request's answer (at most
// Wait) and replays it. done reports that the request was answered.
// When the store fails, the request goes on without a record (Idem.Lost).
func (d *Idempotency) Begin(ctx *fasthttp.RequestCtx, account, endpoint string, body []byte) (idem Idem, done bool) {
	idem.d, idem.ctx = d, Context(ctx)
	key, e := IdemKey(&ctx.Request.Header)
	if e != nil {
		WriteError(ctx, e)
		return idem, true
	}
	if key == nil {
		return idem, false
	}
	r := storage.IdemRef{Account: account, Endpoint: endpoint, Key: string(key)}
	sum := sha256.Sum256(body)
	// The wait ends before the request's own deadline does, so that the
	// duplicate answers its 409 rather than running out of time.
	deadline := time.Now().Add(d.Wait)
	if dl, ok := idem.ctx.Deadline(); ok && dl.Add(-idemMargin).Before(deadline) {
		deadline = dl.Add(-idemMargin)
	}
	for {
		out, rec, err := d.DB.BeginIdem(Context(ctx), r, sum[:])
		if err != nil {
			d.Logger.Warn("idempotency store unavailable; processing without it", "err", err, "request_id", RequestID(ctx))
			idem.Lost = &LostKey{Ref: r, Hash: sum[:]}
			return idem, false
		}
		switch out {
		case storage.IdemNew:
			idem.Ref = &r
			return idem, false
		case storage.IdemMismatch:
			WriteError(ctx, &APIError{Code: CodeConflict, Message: "Idempotency-Key was used with a different request body",
				Details: map[string]any{"field": HeaderIdemKey}})
			return idem, true
		case storage.IdemReplay:
			for _, h := range rec.Response.Header {
				ctx.Response.Header.Set(h.Name, h.Value)
			}
			ctx.Response.Header.Set(HeaderReplay, "true")
			ctx.Response.Header.SetContentType("application/json")
			ctx.SetStatusCode(rec.Response.Status)
			ctx.SetBody(rec.Response.Body)
			idemReplays.Inc()
			return idem, true
		case storage.IdemInFlight:
			if time.Now().After(deadline) {
				WriteError(ctx, &APIError{Code: CodeConflict, Message: "a request with this Idempotency-Key is still in progress; retry later",
					Details: map[string]any{"field": HeaderIdemKey}})
				return idem, true
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Answer writes e and records it under the key, so that a retry with the
// same key and body gets the same answer.
func (i Idem) Answer(ctx *fasthttp.RequestCtx, e *APIError) {
	WriteError(ctx, e)
	if i.Ref == nil {
		return
	}
	resp := storage.IdemResponse{Status: ctx.Response.StatusCode(), Body: append([]byte(nil), ctx.Response.Body()...)}
	if err := i.d.DB.CompleteIdem(i.ctx, *i.Ref, resp); err != nil {
		i.d.Logger.Warn("idempotency record", "err", err, "request_id", RequestID(ctx))
	}
}

// Abort drops the record begun, for an answer that is not recorded (an
// error worth retrying, or one that depends on the balance, not on the
// request: insufficient credits).
func (i Idem) Abort() {
	if i.Ref == nil {
		return
	}
	if err := i.d.DB.AbortIdem(i.ctx, *i.Ref); err != nil {
		i.d.Logger.Warn("idempotency abort", "err", err)
	}
}

// CheckIdemKey is the 400 answer to an Idempotency-Key header that is not
// 8 to 128 characters (spec §7.3, §8), counted as Unicode characters, not
// bytes; a value that is not UTF-8 is refused too. Nil when the key is
// good.
func CheckIdemKey(key []byte) *APIError {
	msg := ""
	if !utf8.Valid(key) {
		msg = "is not UTF-8 text"
	} else if n := utf8.RuneCount(key); n < 8 || n > 128 {
		msg = fmt.Sprintf("is %d characters long", n)
	}
	if msg == "" {
		return nil
	}
	return &APIError{Code: CodeBadRequest, Message: "Idempotency-Key must be 8 to 128 characters",
		Details: map[string]any{"issues": []Issue{{Path: HeaderIdemKey, Message: msg}}}}
}

// IdemKey reads the Idempotency-Key header (spec §7.3): the key, nil when
// there is none, or the 400 answer to a bad one, whose details.issues
// name Idempotency-Key: not 8 to 128 characters (CheckIdemKey; an empty
// value too), or sent on more than one header line. Of two keys, taking
// either would be a guess: a client that retries with the other would be
// charged twice.
func IdemKey(h *fasthttp.RequestHeader) ([]byte, *APIError) {
	vals := h.PeekAll(HeaderIdemKey)
	switch len(vals) {
	case 0:
		return nil, nil
	case 1:
		if e := CheckIdemKey(vals[0]); e != nil {
			return nil, e
		}
		return vals[0], nil
	}
	return nil, &APIError{Code: CodeBadRequest, Message: "Idempotency-Key must be sent once",
		Details: map[string]any{"issues": []Issue{{Path: HeaderIdemKey, Message: fmt.Sprintf("appears %d times", len(vals))}}}}
}
