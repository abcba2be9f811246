package admin

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/webhook/hookapi"
	"github.com/verifyd/verifyd/storage"
)

// Webhooks is what the webhook routes need of the dispatcher
// (webhook.Dispatcher).
type Webhooks interface {
	// Attempts lists the remembered delivery attempts of account ("" for
	// all), newest first.
	Attempts(account string, limit int) []hookapi.Attempt
	// Resend makes an event of the outbox or the dead-letter queue due
	// now (of account, "" for any).
	Resend(ctx context.Context, account, id string) (storage.Event, error)
	// Test sends ev's payload once, under a new event id.
	Test(ctx context.Context, ev storage.Event) hookapi.TestResult
	// CheckURL judges a URL as a batch's webhookUrl is judged.
	CheckURL(raw string) error
}

// errNoWebhooks answers a webhook route when the server delivers none.
var errNoWebhooks = &adminapi.Error{Code: adminapi.CodeNotFound, Message: "webhooks are not delivered by this server"}

// webhookRoutes adds the webhook routes of the operator API (package
// hookapi lists them).
func (s *Server) webhookRoutes(r *router.Router) {
	r.GET("/v1/webhooks/outbox", JSON(s.adminOutbox))
	r.GET("/v1/webhooks/dead-letters", JSON(s.adminDeadLetters))
	r.GET("/v1/webhooks/attempts", JSON(s.adminAttempts))
	r.POST("/v1/webhooks/events/{id}/resend", JSON(s.adminResend))
	r.POST("/v1/webhooks/test", JSON(s.adminTest))
}

// HookHandlers are the webhook routes the dashboard also serves to an
// account's owners (package web), over the same code as the admin socket:
// it sets ?account= to the session's account.
type HookHandlers struct {
	Outbox, DeadLetters, Attempts, Resend, Test HandlerFunc
}

// HookHandlers returns the webhook routes the dashboard shares.
func (s *Server) HookHandlers() HookHandlers {
	return HookHandlers{Outbox: s.adminOutbox, DeadLetters: s.adminDeadLetters, Attempts: s.adminAttempts,
		Resend: s.adminResend, Test: s.adminTest}
}

// listArgs reads ?account= (which must exist) and ?limit= (1 to
// 10,000, default 100).
func (s *Server) listArgs(ctx *fasthttp.RequestCtx) (account string, limit int, err error) {
	args := ctx.QueryArgs()
	account = string(args.Peek("account"))
	limit = 100
	if v := args.Peek("limit"); v != nil {
		n, perr := strconv.Atoi(string(v))
		if perr != nil || n < 1 || n > 10_000 {
			return "", 0, &adminapi.Error{Code: adminapi.CodeBadRequest, Message: "invalid request: limit must be an integer from 1 to 10000",
				Details: map[string]any{"issues": []adminapi.Issue{{Path: "limit", Message: "must be an integer from 1 to 10000"}}}}
		}
		limit = n
	}
	if account != "" {
		if _, err := s.db.GetAccount(httpapi.Context(ctx), account); err != nil {
			return "", 0, err
		}
	}
	return account, limit, nil
}

func eventView(ev storage.Event) hookapi.Event {
	return hookapi.Event{
		ID: ev.ID, Account: ev.Account, Type: ev.Type, URL: ev.URL, Attempts: ev.Attempts,
		CreatedAt: ev.CreatedAt, NextAttempt: ev.NextAttempt, LastStatus: ev.LastStatus, LastError: ev.LastError,
		DeadAt: ev.DeadAt, Body: json.RawMessage(ev.Body),
	}
}

func eventList(evs []storage.Event) hookapi.EventList {
	out := hookapi.EventList{Events: make([]hookapi.Event, 0, len(evs))}
	for _, ev := range evs {
		out.Events = append(out.Events, eventView(ev))
	}
	return out
}

func (s *Server) adminOutbox(ctx *fasthttp.RequestCtx) (any, error) {
	account, limit, err := s.listArgs(ctx)
	if err != nil {
		return nil, err
	}
	evs, err := s.db.OutboxEvents(httpapi.Context(ctx), account, limit)
	if err != nil {
		return nil, err
	}
	return eventList(evs), nil
}

func (s *Server) adminDeadLetters(ctx *fasthttp.RequestCtx) (any, error) {
	account, limit, err := s.listArgs(ctx)
	if err != nil {
		return nil, err
	}
	evs, err := s.db.DeadLetters(httpapi.Context(ctx), account, limit)
	if err != nil {
		return nil, err
	}
	return eventList(evs), nil
}

func (s *Server) adminAttempts(ctx *fasthttp.RequestCtx) (any, error) {
	if s.opts.Webhooks == nil {
		return nil, errNoWebhooks
	}
	account, limit, err := s.listArgs(ctx)
	if err != nil {
		return nil, err
	}
	return hookapi.AttemptList{Attempts: s.opts.Webhooks.Attempts(account, limit)}, nil
}

func (s *Server) adminResend(ctx *fasthttp.RequestCtx) (any, error) {
	if s.opts.Webhooks == nil {
		return nil, errNoWebhooks
	}
	id, _ := ctx.UserValue("id").(string)
	// ?account= (the dashboard's) limits it to that account's events.
	ev, err := s.opts.Webhooks.Resend(httpapi.Context(ctx), string(ctx.QueryArgs().Peek("account")), id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, &adminapi.Error{Code: adminapi.CodeNotFound,
			Message: "no event " + strconv.Quote(id) + " in the outbox or the dead-letter queue (delivered events are not kept)"}
	}
	if err != nil {
		return nil, err
	}
	return eventView(ev), nil
}

func (s *Server) adminTest(ctx *fasthttp.RequestCtx) (any, error) {
	if s.opts.Webhooks == nil {
		return nil, errNoWebhooks
	}
	var req hookapi.TestRequest
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	if req.Account == "" {
		return nil, &adminapi.Error{Code: adminapi.CodeBadRequest, Message: "invalid request: account is required",
			Details: map[string]any{"issues": []adminapi.Issue{{Path: "account", Message: "is required"}}}}
	}
	if _, err := s.db.GetAccount(httpapi.Context(ctx), req.Account); err != nil {
		return nil, err
	}
	last, err := s.db.LastEvent(httpapi.Context(ctx), req.Account)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, &adminapi.Error{Code: adminapi.CodeNotFound, Message: "the account has no webhook event yet whose payload could be replayed"}
	}
	if err != nil {
		return nil, err
	}
	if req.URL != "" {
		if err := s.opts.Webhooks.CheckURL(req.URL); err != nil {
			return nil, &adminapi.Error{Code: adminapi.CodeBadRequest, Message: "invalid request: url " + err.Error(),
				Details: map[string]any{"issues": []adminapi.Issue{{Path: "url", Message: err.Error()}}}}
		}
		last.URL = req.URL
	}
	return s.opts.Webhooks.Test(context.Background(), last), nil
}
