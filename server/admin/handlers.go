package admin

import "github.com/valyala/fasthttp"

// Handlers are admin routes the dashboard (package web) also serves, to
// signed-in owners and operators: the same handlers as the admin socket,
// so a change from the dashboard and one from verifyctl take one code
// path. Each reads its account from the route's "id" user value (and a
// key's from "prefix"), which the dashboard sets to the session's
// account after checking the user's role; WithActor names the user in
// the log lines and as an invitation's creator.
type Handlers struct {
	GetAccount, ListAccounts, AdjustCredits HandlerFunc
	MintKey, ListKeys, RevokeKey            HandlerFunc
	WebhookSecret, RotateWebhookSecret      HandlerFunc
	CreateInvite, ListInvites               HandlerFunc
	OutcomeSettings, SetOutcomeSettings     HandlerFunc
}

// Handlers returns the routes the dashboard shares.
func (s *Server) Handlers() Handlers {
	return Handlers{
		GetAccount: s.getAccount, ListAccounts: s.listAccounts, AdjustCredits: s.adjustCredits,
		MintKey: s.mintKey, ListKeys: s.listKeys, RevokeKey: s.revokeKey,
		WebhookSecret: s.webhookSecret, RotateWebhookSecret: s.rotateWebhookSecret,
		CreateInvite: s.createInvite, ListInvites: s.listInvites,
		OutcomeSettings: s.outcomeSettings, SetOutcomeSettings: s.setOutcomeSettings,
	}
}

// actorKey is the user value WithActor sets.
type actorKey struct{}

// WithActor records that a signed-in user (not a peer on the socket) makes
// this request: the handlers log the user instead of the socket peer.
func WithActor(ctx *fasthttp.RequestCtx, user string) { ctx.SetUserValue(actorKey{}, user) }

// actor is the user WithActor named, or "".
func actor(ctx *fasthttp.RequestCtx) string {
	u, _ := ctx.UserValue(actorKey{}).(string)
	return u
}
