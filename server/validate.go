package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/internal/phase"
	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

const (
	endpointValidate = "POST /v1/validate"
	headerCredits    = "X-Credits-Remaining"
	// headerServerTiming carries the engine's time of a fresh validation.
	headerServerTiming = "Server-Timing"
)

// validate is POST /v1/validate (spec §4.1).
func (s *Server) validate(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	body := ctx.PostBody()
	if len(body) > s.opts.MaxSmallBody {
		httpapi.WriteError(ctx, httpapi.BodyTooLarge(s.opts.MaxSmallBody))
		return
	}
	if !httpapi.RequireJSON(ctx) {
		return
	}
	idem, done := s.idem.Begin(ctx, c.Account, endpointValidate, body)
	if done {
		return
	}
	req, issues := decodeValidate(body)
	if issues != nil {
		idem.Answer(ctx, httpapi.BadRequest("invalid request body", issues))
		return
	}
	// The address is parsed once, here, as POST /v1/batch parses each
	// of its own: both verify, store and answer the same form of it.
	in := address.NewInput(req.Email)
	if req.Cache {
		if s.validateCached(ctx, c, idem, in) {
			return
		}
	}
	s.validateFresh(ctx, c, idem, in)
}

// validateFresh holds a credit, probes, and charges the credit in the same
// synced write as the result, its history row and the idempotent response
// (DESIGN.md: concurrent requests never overdraw; a crash loses no charge
// and double-charges none).
func (s *Server) validateFresh(ctx *fasthttp.RequestCtx, c *httpapi.Caller, idem httpapi.Idem, in address.Input) {
	t := time.Now()
	hold, err := s.db.Hold(httpapi.Context(ctx), c.Account, 1, httpapi.RequestID(ctx))
	phase.Since(phase.Hold, t)
	var ice *storage.InsufficientCreditsError
	switch {
	case errors.As(err, &ice):
		s.insufficient(ctx, idem, ice)
		return
	case err != nil:
		idem.Abort()
		s.internal(ctx, "hold credit", err)
		return
	}
	// The engine runs within the real-time budget, and within the
	// request's deadline (http.request_timeout exceeds the budget). A
	// request that spent so much of its time waiting (on a duplicate's
	// key, on a locked row) that its budget no longer fits is not probed
	// short, to be charged an unknown: its hold goes back and it answers
	// 500, safe to retry.
	rctx := httpapi.Context(ctx)
	if dl, ok := rctx.Deadline(); ok && time.Until(dl) < s.opts.RealtimeBudget {
		if _, rerr := s.db.Release(rctx, hold, "no time left to probe"); rerr != nil {
			s.reqLog(ctx).Error("release hold", "err", rerr)
		}
		idem.Abort()
		s.internal(ctx, "verify", fmt.Errorf("%v of the request's time left, under the real-time budget %v: %w",
			time.Until(dl).Round(time.Millisecond), s.opts.RealtimeBudget, context.DeadlineExceeded))
		return
	}
	pctx, cancel := context.WithTimeout(rctx, s.opts.RealtimeBudget)
	if s.opts.Typos != nil {
		pctx = probe.WithTypoTargets(pctx, s.opts.Typos.Targets(c.Account))
	}
	res, err := s.opts.Verifier.Verify(pctx, in)
	cancel()
	if err != nil || res == nil {
		if _, rerr := s.db.Release(httpapi.Context(ctx), hold, "engine error"); rerr != nil {
			s.reqLog(ctx).Error("release hold", "err", rerr)
		}
		idem.Abort()
		s.internal(ctx, "verify", fmt.Errorf("engine: %w", err))
		return
	}
	// The engine's own time, to the microsecond (the receipt's latency_ms
	// is whole milliseconds), so that a client can tell it from the API's
	// (W3C Server-Timing; verifybench reports the difference).
	ctx.Response.Header.Set(headerServerTiming, "engine;dur="+strconv.FormatFloat(float64(res.Latency.Microseconds())/1000, 'f', 3, 64))
	if o := s.opts.Outcomes; o != nil {
		// What the account's own sending taught weighs over what the
		// server said at RCPT (docs/outcomes.md).
		if err := o.Apply(httpapi.Context(ctx), c.Account, res); err != nil {
			s.reqLog(ctx).Warn("outcome evidence", "err", err)
		}
	}
	rec := receipt.Of(res)
	stored := receipt.Stored(res.Email, res)
	t = time.Now()
	s.charge(ctx, c, idem, &hold, stored, func(balance int64) ([]byte, error) {
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
func (s *Server) validateCached(ctx *fasthttp.RequestCtx, c *httpapi.Caller, idem httpapi.Idem, in address.Input) bool {
	prev, ok, err := s.db.LookupCache(httpapi.Context(ctx), c.Account, in.Email, s.opts.CacheMaxAge)
	if err != nil || !ok {
		if err != nil {
			s.reqLog(ctx).Warn("cache lookup", "err", err)
		}
		return false
	}
	// The receipt and the history row name the address as this request
	// spelled it (server/README.md, "Address case"): the cached result
	// may be another spelling's, a batch's lower-cased row among them.
	stored := storage.Result{
		Email:      in.Email,
		Status:     prev.Status,
		Score:      prev.Score,
		LatencyMs:  prev.LatencyMs,
		CachedFrom: prev.ID,
		// ProbedAt left zero: the charge's time, taken under the
		// account's lock, so history rows come in order.
	}
	if o := s.opts.Outcomes; o != nil {
		l, err := o.Learned(httpapi.Context(ctx), c.Account, prev.Email, "", probe.Status(prev.Status))
		if err != nil {
			s.reqLog(ctx).Warn("outcome evidence", "err", err)
		}
		if l != nil {
			// The cached verdict is no longer what the account's own
			// sending says: the receipt is decoded, changed and signed
			// anew (the common path signs it undecoded).
			return s.validateLearned(ctx, c, idem, prev, stored, l)
		}
	}
	// The result is known: no hold, one synced write that checks the
	// credits and charges them. The stored receipt is signed again as it
	// is, with cached and credits_remaining set (and the active kid): it
	// is not decoded. Its verdict is prev's as it is.
	stored.Repeats = true
	s.charge(ctx, c, idem, nil, stored, func(balance int64) ([]byte, error) {
		cached := receipt.Field{Name: "cached", Value: jsonTrue}
		credits := receipt.Field{Name: "credits_remaining", Value: strconv.AppendInt(nil, balance, 10)}
		if prev.Email != in.Email {
			return s.opts.Keys.SignWith(prev.Receipt, cached, credits,
				receipt.Field{Name: "email", Value: receipt.AppendString(nil, in.Email)})
		}
		return s.opts.Keys.SignWith(prev.Receipt, cached, credits)
	})
	return true
}

// validateLearned answers cache: true from the account's recent result
// changed by what delivery outcomes taught since (probe.Learned); false
// when its receipt does not decode, to probe instead.
func (s *Server) validateLearned(ctx *fasthttp.RequestCtx, c *httpapi.Caller, idem httpapi.Idem, prev storage.Result, stored storage.Result, l *probe.Learned) bool {
	var rec receipt.Receipt
	if err := json.Unmarshal(prev.Receipt, &rec); err != nil {
		s.reqLog(ctx).Warn("cached receipt does not decode", "result", prev.ID, "err", err)
		return false
	}
	receipt.Learn(&rec, l)
	rec.Email, rec.Cached, rec.Kid = stored.Email, true, ""
	stored.Status, stored.Score = rec.Status, rec.Score
	s.charge(ctx, c, idem, nil, stored, func(balance int64) ([]byte, error) {
		rec.CreditsRemaining = balance
		return s.opts.Keys.SignStruct(&rec)
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
func (s *Server) charge(ctx *fasthttp.RequestCtx, c *httpapi.Caller, idem httpapi.Idem, hold *storage.Hold, stored storage.Result, sign func(balance int64) ([]byte, error)) {
	var body []byte
	req := storage.ChargeRequest{
		Result: stored,
		Idem:   idem.Ref,
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
	if lost := idem.Lost; lost != nil {
		// The key BeginIdem could not record: the charge records it, so
		// that a retry replays this charge instead of making another.
		req.Idem, req.IdemHash = &lost.Ref, lost.Hash
	}
	var charged storage.Charged
	var err error
	if hold != nil {
		charged, err = s.db.Charge(httpapi.Context(ctx), *hold, req)
	} else {
		charged, err = s.db.ChargeDirect(httpapi.Context(ctx), c.Account, 1, req)
	}
	var ice *storage.InsufficientCreditsError
	switch {
	case hold == nil && errors.As(err, &ice):
		s.insufficient(ctx, idem, ice)
		return
	case err != nil:
		if hold != nil {
			// Under the request's deadline too, which may be what failed
			// the charge: a release that cannot be made now is the
			// store's to finish (postgres releases it from its
			// heartbeat), not the client's to wait for.
			if _, rerr := s.db.Release(httpapi.Context(ctx), *hold, "charge failed"); rerr != nil && !errors.Is(rerr, storage.ErrHoldNotActive) {
				s.reqLog(ctx).Error("release hold", "err", rerr)
			}
		}
		idem.Abort()
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
// httpapi/README.md, "Idempotency").
func (s *Server) insufficient(ctx *fasthttp.RequestCtx, idem httpapi.Idem, ice *storage.InsufficientCreditsError) {
	idem.Abort()
	httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: fmt.Sprintf("insufficient credits: 1 needed, %d available", ice.Available()),
		Details: map[string]any{"currentCredits": ice.Available()}})
}
