package admin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/outcomes/platform"
	"github.com/verifyd/verifyd/storage"
)

func outcomeSettingsView(account string, o storage.OutcomeSettings) adminapi.OutcomeSettings {
	topics := o.SESTopics
	if topics == nil {
		topics = []string{}
	}
	return adminapi.OutcomeSettings{Account: account, SESTopics: topics, SendGridKey: o.SendGridKey,
		MailgunKeySet: o.MailgunKey != "", PostmarkUser: o.PostmarkUser, PostmarkPasswordSet: o.PostmarkPassHash != ""}
}

// settingsOf returns the path's account and its outcome settings, or a
// 404.
func (s *Server) settingsOf(ctx *fasthttp.RequestCtx) (string, storage.OutcomeSettings, error) {
	id := pathID(ctx)
	o, err := s.db.OutcomeSettings(httpapi.Context(ctx), id)
	if errors.Is(err, storage.ErrNotFound) {
		return "", o, notFound("no account %q", id)
	}
	return id, o, err
}

// GET /v1/accounts/{id}/outcome-settings
func (s *Server) outcomeSettings(ctx *fasthttp.RequestCtx) (any, error) {
	id, o, err := s.settingsOf(ctx)
	if err != nil {
		return nil, err
	}
	noStore(ctx)
	return outcomeSettingsView(id, o), nil
}

// PUT /v1/accounts/{id}/outcome-settings {ses_topics?, sendgrid_key?,
// mailgun_key?, postmark_user?, postmark_password?}
func (s *Server) setOutcomeSettings(ctx *fasthttp.RequestCtx) (any, error) {
	var req adminapi.SetOutcomeSettings
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	id, o, err := s.settingsOf(ctx)
	if err != nil {
		return nil, err
	}
	var is issues
	if t := req.SESTopics; t != nil {
		if len(*t) > 20 {
			is.add("ses_topics", "at most 20 topics")
		}
		for i, arn := range *t {
			if !strings.HasPrefix(arn, "arn:aws:sns:") || len(arn) > 256 || strings.ContainsAny(arn, " \t\r\n") {
				is.add(fmt.Sprintf("ses_topics[%d]", i), "must be an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)")
			}
		}
		o.SESTopics = *t
	}
	if k := req.SendGridKey; k != nil {
		if *k != "" {
			if _, err := platform.ParseSendGridKey(*k); err != nil {
				is.add("sendgrid_key", "must be SendGrid's verification key: base64 of a P-256 public key")
			}
		}
		o.SendGridKey = *k
	}
	if k := req.MailgunKey; k != nil {
		if len(*k) > 200 || strings.ContainsAny(*k, " \t\r\n") {
			is.add("mailgun_key", "must be Mailgun's webhook signing key")
		}
		o.MailgunKey = *k
	}
	if u := req.PostmarkUser; u != nil {
		if len(*u) > 100 || strings.ContainsAny(*u, ": \t\r\n") {
			is.add("postmark_user", "must be at most 100 characters, without a colon or spaces")
		}
		o.PostmarkUser = *u
	}
	if p := req.PostmarkPassword; p != nil {
		switch {
		case *p == "":
			o.PostmarkPassHash = ""
		case len(*p) < 16 || len(*p) > 200:
			is.add("postmark_password", "must be 16 to 200 characters")
		default:
			o.PostmarkPassHash = platform.PostmarkPassHash(*p)
		}
	}
	if (o.PostmarkUser == "") != (o.PostmarkPassHash == "") {
		is.add("postmark_user", "set the user and the password together")
	}
	if err := is.err(); err != nil {
		return nil, err
	}
	if err := s.db.SetOutcomeSettings(httpapi.Context(ctx), id, o); err != nil {
		return nil, err
	}
	s.log.Info("outcome settings changed", append([]any{"account", id}, peerAttrs(ctx)...)...)
	return outcomeSettingsView(id, o), nil
}
