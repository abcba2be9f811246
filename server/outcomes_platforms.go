package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/outcomes/platform"
	"github.com/verifyd/verifyd/storage"
)

// Platforms are the sending platforms' webhook receivers
// (/v1/outcomes/{platform}); cmd/verifyd configures SNS's certificate
// hosts and roots.
type Platforms struct {
	SNS      *platform.SNS
	SendGrid *platform.SendGrid
	Mailgun  *platform.Mailgun
	Postmark *platform.Postmark
}

// platformRefused counts the refused platform requests by platform and
// kind (signature, not_allowed, config, payload, unavailable, account).
func platformRefused(name, kind string) *metrics.Counter {
	return metrics.GetOrCreateCounter(`verifyd_outcomes_platform_refused_total{platform="` + name + `",reason="` + kind + `"}`)
}

// platformKind is the label of a platform error's kind.
func platformKind(err error) string {
	switch {
	case errors.Is(err, platform.ErrSignature):
		return "signature"
	case errors.Is(err, platform.ErrNotAllowed):
		return "not_allowed"
	case errors.Is(err, platform.ErrConfig):
		return "config"
	case errors.Is(err, platform.ErrPayload):
		return "payload"
	case errors.Is(err, platform.ErrUnavailable):
		return "unavailable"
	}
	return "other"
}

// platformAnswer is the 200 body of /v1/outcomes/{platform}.
type platformAnswer struct {
	outcomesSummary
	// Skipped: events of kinds verifyd does not use; Ignored: events
	// whose recipient is not an address.
	Skipped   int  `json:"skipped"`
	Ignored   int  `json:"ignored"`
	Confirmed bool `json:"subscription_confirmed"`
}

// postPlatformOutcomes is POST /v1/outcomes/{platform}?account=<id>
// (docs/api.md): a sending platform's webhook, authenticated by the
// platform's own scheme against the account's settings, not by an API
// key. An unknown account, a platform the account has not set up, and a
// request that is not authentic answer alike: 401.
func (s *Server) postPlatformOutcomes(ctx *fasthttp.RequestCtx) {
	name, _ := ctx.UserValue("platform").(string)
	body := ctx.PostBody()
	if len(body) > s.opts.MaxBodyBytes {
		httpapi.WriteError(ctx, httpapi.BodyTooLarge(s.opts.MaxBodyBytes))
		return
	}
	args := ctx.QueryArgs()
	if issues := httpapi.QueryIssues(args, "account"); issues != nil || !args.Has("account") {
		if issues == nil {
			issues = []httpapi.Issue{{Path: "account", Message: "required: the account the platform reports for"}}
		}
		httpapi.WriteError(ctx, httpapi.BadRequest("invalid query", issues))
		return
	}
	account := string(args.Peek("account"))
	refuse := func(kind string, err error) {
		platformRefused(name, kind).Inc()
		s.reqLog(ctx).Warn("platform outcomes refused", "platform", name, "account", account, "reason", kind, "err", err)
		switch kind {
		case "payload":
			httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: "the body is not the platform's documented event format"})
		case "unavailable":
			ctx.Response.Header.Set("Retry-After", "60")
			httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeInternal,
				Message: "cannot check the platform's signature now; retry later"})
		default:
			httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeUnauthorized,
				Message: "not authentic, or the account has not set up this platform"})
		}
	}
	set, err := s.db.OutcomeSettings(httpapi.Context(ctx), account)
	if errors.Is(err, storage.ErrNotFound) {
		refuse("account", err)
		return
	}
	if err != nil {
		s.internal(ctx, "outcome settings", err)
		return
	}
	p := s.opts.Platforms
	var res platform.Result
	switch name {
	case platform.NameSES:
		if len(set.SESTopics) == 0 {
			refuse("config", errors.New("no SNS topic"))
			return
		}
		res, err = p.SNS.Receive(httpapi.Context(ctx), body, set.SESTopics)
	case platform.NameSendGrid:
		res, err = p.SendGrid.Receive(body, func(h string) string { return string(ctx.Request.Header.Peek(h)) }, set.SendGridKey)
	case platform.NameMailgun:
		res, err = p.Mailgun.Receive(body, set.MailgunKey)
	case platform.NamePostmark:
		res, err = p.Postmark.Receive(body, string(ctx.Request.Header.Peek("Authorization")), set.PostmarkUser, set.PostmarkPassHash)
	default:
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeNotFound, Message: "no such platform: the platforms are ses, sendgrid, mailgun and postmark"})
		return
	}
	if err != nil {
		refuse(platformKind(err), err)
		return
	}
	ans := platformAnswer{Skipped: res.Skipped, Confirmed: res.Confirmed}
	outs := make([]storage.Outcome, 0, len(res.Events))
	for _, e := range res.Events {
		in := address.NewInput(e.Email)
		if in.Err != nil {
			ans.Ignored++
			continue
		}
		outs = append(outs, storage.Outcome{EventID: platformEventID(name, e.ID), Email: in.Email, Event: e.Type, At: e.At,
			Source: name, SMTPCode: e.SMTPCode, Enhanced: e.Enhanced, Diagnostic: e.Diagnostic})
	}
	if len(outs) > 0 {
		sum, err := s.opts.Outcomes.Record(httpapi.Context(ctx), account, outs)
		if err != nil {
			s.internal(ctx, "record outcomes", err)
			return
		}
		ans.outcomesSummary = outcomesSummary{Received: sum.Received, Stored: sum.Stored, Duplicates: sum.Duplicates,
			Matched: sum.Matched, Unmatched: sum.Unmatched, Bounced: sum.Bounced, FalseNegatives: sum.FalseNegatives}
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, ans)
}

// platformEventID is an outcome's event id: the platform's name and its
// id, so that the platforms' and POST /v1/outcomes' ids never meet; a
// hash when that is too long.
func platformEventID(name, id string) string {
	out := name + ":" + id
	if len(out) <= storage.MaxOutcomeEventID && !strings.ContainsRune(out, 0) {
		return out
	}
	sum := sha256.Sum256([]byte(out))
	return name + ":" + hex.EncodeToString(sum[:])
}
