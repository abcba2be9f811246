package admin

import (
	"errors"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
)

// The dashboard's users and the invitations to accounts (server/web), for
// operators: verifyctl users and verifyctl accounts invite.

func userView(u storage.User) adminapi.User {
	v := adminapi.User{ID: u.ID, Email: u.Email, Operator: u.Operator, Accounts: []adminapi.Membership{}, Created: u.CreatedAt}
	for _, m := range u.Accounts {
		v.Accounts = append(v.Accounts, adminapi.Membership{Account: m.Account, Role: string(m.Role)})
	}
	return v
}

func inviteView(iv storage.Invite, token string) adminapi.Invite {
	return adminapi.Invite{Token: token, ID: iv.ID, Account: iv.Account, Role: string(iv.Role), Email: iv.Email,
		CreatedBy: iv.CreatedBy, CreatedAt: iv.CreatedAt, ExpiresAt: iv.ExpiresAt}
}

// POST /v1/users {email, password, operator?}
func (s *Server) addUser(ctx *fasthttp.RequestCtx) (any, error) {
	var req adminapi.AddUser
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	var is issues
	email := strings.TrimSpace(req.Email)
	if email == "" || !strings.Contains(email, "@") || len(email) > storage.MaxEmail {
		is.add("email", "must be an email address of at most %d bytes", storage.MaxEmail)
	}
	if s.opts.HashPassword == nil {
		return nil, errors.New("admin: no password hasher")
	}
	hash, err := s.opts.HashPassword(req.Password)
	if err != nil {
		is.add("password", "%s", strings.TrimPrefix(err.Error(), "password "))
	}
	if err := is.err(); err != nil {
		return nil, err
	}
	u, err := s.db.CreateUser(httpapi.Context(ctx), email, hash, req.Operator)
	if errors.Is(err, storage.ErrEmailTaken) {
		return nil, &adminapi.Error{Code: adminapi.CodeConflict, Message: "a user with that email exists", Details: map[string]any{"field": "email"}}
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("user added", append([]any{"user", u.ID, "operator", u.Operator}, peerAttrs(ctx)...)...)
	ctx.SetStatusCode(fasthttp.StatusCreated)
	return userView(u), nil
}

// GET /v1/users
func (s *Server) listUsers(ctx *fasthttp.RequestCtx) (any, error) {
	us, err := s.db.ListUsers(httpapi.Context(ctx))
	if err != nil {
		return nil, err
	}
	l := adminapi.UserList{Users: []adminapi.User{}}
	for _, u := range us {
		l.Users = append(l.Users, userView(u))
	}
	return l, nil
}

// POST /v1/users/{id}/operator {operator}; {id} is a user id or email.
func (s *Server) setOperator(ctx *fasthttp.RequestCtx) (any, error) {
	var req adminapi.SetOperator
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	name := pathID(ctx)
	u, err := s.db.GetUser(httpapi.Context(ctx), name)
	if errors.Is(err, storage.ErrNotFound) {
		u, err = s.db.UserByEmail(httpapi.Context(ctx), name)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return nil, notFound("no user %q", name)
	}
	if err != nil {
		return nil, err
	}
	if u, err = s.db.SetOperator(httpapi.Context(ctx), u.ID, req.Operator); err != nil {
		return nil, err
	}
	s.log.Info("operator role changed", append([]any{"user", u.ID, "operator", u.Operator}, peerAttrs(ctx)...)...)
	return userView(u), nil
}

// POST /v1/accounts/{id}/invites {role, email?}
func (s *Server) createInvite(ctx *fasthttp.RequestCtx) (any, error) {
	var req adminapi.CreateInvite
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	var is issues
	role := storage.Role(req.Role)
	if !role.Valid() {
		is.add("role", "must be owner or member, not %q", req.Role)
	}
	if e := strings.TrimSpace(req.Email); req.Email != "" && (!strings.Contains(e, "@") || len(e) > storage.MaxEmail) {
		is.add("email", "must be an email address of at most %d bytes", storage.MaxEmail)
	}
	if err := is.err(); err != nil {
		return nil, err
	}
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	by := storage.OperatorInviter
	if u := actor(ctx); u != "" {
		by = u
	}
	token, iv, err := s.db.CreateInvite(httpapi.Context(ctx), a.ID, role, req.Email, by, s.opts.InviteLifetime)
	if err != nil {
		return nil, err
	}
	s.log.Info("invitation created", append([]any{"account", a.ID, "invite", iv.ID, "role", iv.Role}, peerAttrs(ctx)...)...)
	noStore(ctx)
	ctx.SetStatusCode(fasthttp.StatusCreated)
	return inviteView(iv, token), nil
}

// GET /v1/accounts/{id}/invites: the pending ones.
func (s *Server) listInvites(ctx *fasthttp.RequestCtx) (any, error) {
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	ivs, err := s.db.Invites(httpapi.Context(ctx), a.ID)
	if err != nil {
		return nil, err
	}
	l := adminapi.InviteList{Invites: []adminapi.Invite{}}
	for _, iv := range ivs {
		l.Invites = append(l.Invites, inviteView(iv, ""))
	}
	return l, nil
}
