package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/internal/phase"
	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

const (
	endpointValidate = "POST /v1/validate"
	headerIdemKey    = "Idempotency-Key"
	headerReplay     = "Idempotent-Replay"
	headerCredits    = "X-Credits-Remaining"
	// headerServerTiming carries the engine's time of a fresh validation.
	headerServerTiming = "Server-Timing"
)

// validate is POST /v1/validate (spec §4.1).
func (s *Server) validate(ctx *fasthttp.RequestCtx, c *caller) {
	body := ctx.PostBody()
	if len(body) > s.opts.MaxSmallBody {
		writeError(ctx, BodyTooLarge(s.opts.MaxSmallBody))
		return
	}
	if !RequireJSON(ctx) {
		return
	}
	idem, lost, done := s.beginIdem(ctx, c, endpointValidate, body)
	if done {
		return
	}
	req, issues := decodeValidate(body)
	if issues != nil {
		s.answer(ctx, idem, badRequest("invalid request body", map[string]any{"issues": issues}))
		return
	}
	if req.Cache {
		if s.validateCached(ctx, c, idem, lost, req.Email) {
			return
		}
	}
	s.validateFresh(ctx, c, idem, lost, req.Email)
}

// validateFresh holds a credit, probes, and charges the credit in the same
// synced write as the result, its history row and the idempotent response
// (DESIGN.md: concurrent requests never overdraw; a crash loses no charge
// and double-charges none).
func (s *Server) validateFresh(ctx *fasthttp.RequestCtx, c *caller, idem *storage.IdemRef, lost *lostKey, email string) {
	t := time.Now()
	hold, err := s.db.Hold(c.account, 1, requestID(ctx))
	phase.Since(phase.Hold, t)
	var ice *storage.InsufficientCreditsError
	switch {
	case errors.As(err, &ice):
		s.insufficient(ctx, idem, ice)
		return
	case err != nil:
		s.abortIdem(idem)
		s.internal(ctx, "hold credit", err)
		return
	}
	// The engine gets its own context: the request's may not outlive the
	// handler, and the probe must end within the budget.
	pctx, cancel := context.WithTimeout(context.Background(), s.opts.RealtimeBudget)
	res, err := s.opts.Verifier.Verify(pctx, strings.Clone(email))
	cancel()
	if err != nil || res == nil {
		if _, rerr := s.db.Release(hold, "engine error"); rerr != nil {
			s.reqLog(ctx).Error("release hold", "err", rerr)
		}
		s.abortIdem(idem)
		s.internal(ctx, "verify", fmt.Errorf("engine: %w", err))
		return
	}
	// The engine's own time, to the microsecond (the receipt's latency_ms
	// is whole milliseconds), so that a client can tell it from the API's
	// (W3C Server-Timing; verifybench reports the difference).
	ctx.Response.Header.Set(headerServerTiming, "engine;dur="+strconv.FormatFloat(float64(res.Latency.Microseconds())/1000, 'f', 3, 64))
	rec := newReceipt(res)
	stored := storage.Result{
		Email:     res.Email,
		Status:    string(res.Status),
		Score:     res.Score,
		LatencyMs: res.Latency.Milliseconds(),
		ProbedAt:  res.ProbedAt,
		// An unknown verdict is not worth serving from the cache.
		SkipCache: res.Status == probe.StatusUnknown,
	}
	t = time.Now()
	s.charge(ctx, c, idem, lost, &hold, stored, func(balance int64) ([]byte, error) {
		rec.CreditsRemaining = balance
		return s.opts.Keys.SignStruct(rec)
	})
	phase.Since(phase.Charge, t)
	if ctx.Response.StatusCode() == fasthttp.StatusOK {
		validateOverhead.UpdateDuration(ctx.Time().Add(res.Latency))
	}
}

// validateCached answers from the account's own recent result, when there
// is one; it still costs a credit and writes a history row (spec §2.1).
func (s *Server) validateCached(ctx *fasthttp.RequestCtx, c *caller, idem *storage.IdemRef, lost *lostKey, email string) bool {
	prev, ok, err := s.db.LookupCache(c.account, strings.ToLower(email), s.opts.CacheMaxAge)
	if err != nil || !ok {
		if err != nil {
			s.reqLog(ctx).Warn("cache lookup", "err", err)
		}
		return false
	}
	stored := storage.Result{
		Email:      prev.Email,
		Status:     prev.Status,
		Score:      prev.Score,
		LatencyMs:  prev.LatencyMs,
		CachedFrom: prev.ID,
		// ProbedAt left zero: the charge's time, taken under the
		// account's lock, so history rows come in order.
	}
	// The result is known: no hold, one synced write that checks the
	// credits and charges them. The stored receipt is signed again as it
	// is, with cached and credits_remaining set (and the active kid): it
	// is not decoded.
	s.charge(ctx, c, idem, lost, nil, stored, func(balance int64) ([]byte, error) {
		return s.opts.Keys.SignWith(prev.Receipt,
			receipt.Field{Name: "cached", Value: jsonTrue},
			receipt.Field{Name: "credits_remaining", Value: strconv.AppendInt(nil, balance, 10)})
	})
	return true
}

var jsonTrue = []byte("true")

// charge completes a validation: sign makes the receipt once the balance
// after the charge is known (credits_remaining), inside the charge (see
// storage.ChargeRequest.Seal).
//
// With a hold, its credit is charged; without (nil), one credit is charged
// directly if available.
func (s *Server) charge(ctx *fasthttp.RequestCtx, c *caller, idem *storage.IdemRef, lost *lostKey, hold *storage.Hold, stored storage.Result, sign func(balance int64) ([]byte, error)) {
	var body []byte
	req := storage.ChargeRequest{
		Result: stored,
		Idem:   idem,
		Seal: func(_ storage.Result, balance int64) (storage.Sealed, error) {
			signed, err := sign(balance)
			if err != nil {
				return storage.Sealed{}, err
			}
			body = signed
			return storage.Sealed{Receipt: signed, Response: storage.IdemResponse{
				Status: fasthttp.StatusOK,
				Header: []storage.HeaderField{{Name: headerCredits, Value: strconv.FormatInt(balance, 10)}},
				Body:   signed,
			}}, nil
		},
	}
	if idem == nil && lost != nil {
		// The key BeginIdem could not record: the charge records it, so
		// that a retry replays this charge instead of making another.
		req.Idem, req.IdemHash = &lost.ref, lost.hash
	}
	var charged storage.Charged
	var err error
	if hold != nil {
		charged, err = s.db.Charge(*hold, req)
	} else {
		charged, err = s.db.ChargeDirect(c.account, 1, req)
	}
	var ice *storage.InsufficientCreditsError
	switch {
	case hold == nil && errors.As(err, &ice):
		s.insufficient(ctx, idem, ice)
		return
	case err != nil:
		if hold != nil {
			if _, rerr := s.db.Release(*hold, "charge failed"); rerr != nil && !errors.Is(rerr, storage.ErrHoldNotActive) {
				s.reqLog(ctx).Error("release hold", "err", rerr)
			}
		}
		s.abortIdem(idem)
		s.internal(ctx, "charge", err)
		return
	}
	creditsCharged.Inc()
	ctx.Response.Header.Set(headerCredits, strconv.FormatInt(charged.Balance, 10))
	ctx.Response.Header.SetContentType("application/json")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(body)
}

// insufficient answers 400 for too few credits. It is not recorded
// under the Idempotency-Key: it depends on the balance, not on the
// request, so the same key retried after a top-up is processed (the IETF
// idempotency draft lets a server leave client errors unrecorded;
// README.md, "Idempotency").
func (s *Server) insufficient(ctx *fasthttp.RequestCtx, idem *storage.IdemRef, ice *storage.InsufficientCreditsError) {
	s.abortIdem(idem)
	writeError(ctx, &APIError{Code: CodeBadRequest, Message: fmt.Sprintf("insufficient credits: 1 needed, %d available", ice.Available()),
		Details: map[string]any{"currentCredits": ice.Available()}})
}

// response is a non-200 answer that may be recorded for replay.
type response struct {
	status int
	err    *APIError
}

func badRequest(msg string, details map[string]any) response {
	return response{status: fasthttp.StatusBadRequest, err: &APIError{Code: CodeBadRequest, Message: msg, Details: details}}
}

// answer writes r and records it for the idempotency key, so a retry with
// the same key and body gets the same 400.
func (s *Server) answer(ctx *fasthttp.RequestCtx, idem *storage.IdemRef, r response) {
	writeError(ctx, r.err)
	if idem != nil {
		resp := storage.IdemResponse{Status: ctx.Response.StatusCode(), Body: append([]byte(nil), ctx.Response.Body()...)}
		if err := s.db.CompleteIdem(*idem, resp); err != nil {
			s.reqLog(ctx).Warn("idempotency record", "err", err)
		}
	}
}

func (s *Server) abortIdem(idem *storage.IdemRef) {
	if idem == nil {
		return
	}
	if err := s.db.AbortIdem(*idem); err != nil {
		s.log.Warn("idempotency abort", "err", err)
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
		Details: map[string]any{"issues": []Issue{{Path: headerIdemKey, Message: msg}}}}
}

// IdemKey reads the Idempotency-Key header (spec §7.3) for POST
// /v1/validate and POST /v1/batch: the key, nil when there is none, or the
// 400 answer to a bad one, whose details.issues name Idempotency-Key: not
// 8 to 128 characters (CheckIdemKey; an empty value too), or sent on more
// than one header line. Of two keys, taking either would be a guess: a
// client that retries with the other would be charged twice.
func IdemKey(h *fasthttp.RequestHeader) ([]byte, *APIError) {
	vals := h.PeekAll(headerIdemKey)
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
		Details: map[string]any{"issues": []Issue{{Path: headerIdemKey, Message: fmt.Sprintf("appears %d times", len(vals))}}}}
}

// beginIdem handles the Idempotency-Key header (spec §7.3): a bad key, or
// two, answer 400 (IdemKey); a replay answers the stored response with
// Idempotent-Replay: true; another body under the same key answers 409; a
// concurrent duplicate waits for the first request's answer and replays
// it. done reports that the request was answered. When the store fails,
// the request goes on without idempotency (fail-open, spec §7.3), and
// lost names the key: a charge records it then (ChargeRequest.IdemHash),
// so that a retry of a charged request replays it rather than charging
// again.
func (s *Server) beginIdem(ctx *fasthttp.RequestCtx, c *caller, endpoint string, body []byte) (ref *storage.IdemRef, lost *lostKey, done bool) {
	key, e := IdemKey(&ctx.Request.Header)
	if e != nil {
		writeError(ctx, e)
		return nil, nil, true
	}
	if key == nil {
		return nil, nil, false
	}
	r := storage.IdemRef{Account: c.account, Endpoint: endpoint, Key: string(key)}
	sum := sha256.Sum256(body)
	deadline := time.Now().Add(s.opts.RealtimeBudget + 5*time.Second)
	for {
		out, rec, err := s.db.BeginIdem(r, sum[:])
		if err != nil {
			s.reqLog(ctx).Warn("idempotency store unavailable; processing without it", "err", err)
			return nil, &lostKey{ref: r, hash: sum[:]}, false
		}
		switch out {
		case storage.IdemNew:
			return &r, nil, false
		case storage.IdemMismatch:
			writeError(ctx, &APIError{Code: CodeConflict, Message: "Idempotency-Key was used with a different request body",
				Details: map[string]any{"field": headerIdemKey}})
			return nil, nil, true
		case storage.IdemReplay:
			for _, h := range rec.Response.Header {
				ctx.Response.Header.Set(h.Name, h.Value)
			}
			ctx.Response.Header.Set(headerReplay, "true")
			ctx.Response.Header.SetContentType("application/json")
			ctx.SetStatusCode(rec.Response.Status)
			ctx.SetBody(rec.Response.Body)
			idemReplays.Inc()
			return nil, nil, true
		case storage.IdemInFlight:
			if time.Now().After(deadline) {
				writeError(ctx, &APIError{Code: CodeConflict, Message: "a request with this Idempotency-Key is still in progress; retry later",
					Details: map[string]any{"field": headerIdemKey}})
				return nil, nil, true
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// lostKey is an Idempotency-Key BeginIdem could not record, and its
// request's hash.
type lostKey struct {
	ref  storage.IdemRef
	hash []byte
}

// requestID is the request's id for logs and ledger references.
func requestID(ctx *fasthttp.RequestCtx) string {
	return "req-" + strconv.FormatUint(ctx.ID(), 36) + "-" + strconv.FormatInt(ctx.ConnTime().UnixNano()%1e9, 36)
}
