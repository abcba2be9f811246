package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

// scopes are the API key scopes of spec §5, and outcomes:write (a key a
// sending platform reports delivery outcomes with, and nothing else).
var scopes = []string{storage.ScopeValidateRead, storage.ScopeValidateWrite, storage.ScopeOutcomesWrite}

func keyView(k storage.APIKey) adminapi.Key {
	return adminapi.Key{
		Prefix:    k.Prefix,
		Account:   k.Account,
		Label:     k.Label,
		Scopes:    slices.Clone(k.Scopes),
		CreatedAt: k.CreatedAt,
		Revoked:   k.Revoked,
		RevokedAt: k.RevokedAt,
		LastUsed:  k.LastUsed,
	}
}

// noStore keeps an answer holding a secret out of any cache.
func noStore(ctx *fasthttp.RequestCtx) { ctx.Response.Header.Set("Cache-Control", "no-store") }

// POST /v1/accounts/{id}/keys {scopes, label?}
func (s *Server) mintKey(ctx *fasthttp.RequestCtx) (any, error) {
	var req adminapi.MintKey
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	var is issues
	if len(req.Scopes) == 0 {
		is.add("scopes", "must list at least one of %s", strings.Join(scopes, ", "))
	}
	for i, sc := range req.Scopes {
		if !slices.Contains(scopes, sc) {
			is.add(fmt.Sprintf("scopes[%d]", i), "must be one of %s, not %q", strings.Join(scopes, ", "), sc)
		}
	}
	checkNote(&is, "label", req.Label)
	if err := is.err(); err != nil {
		return nil, err
	}
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	token, k, err := s.db.MintKey(httpapi.Context(ctx), a.ID, req.Scopes, req.Label)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, notFound("no account %q", a.ID)
	}
	if err != nil {
		return nil, err
	}
	keysMinted.Inc()
	s.log.Info("API key minted", append([]any{"account", a.ID, "prefix", k.Prefix, "scopes", k.Scopes}, peerAttrs(ctx)...)...)
	noStore(ctx)
	ctx.SetStatusCode(fasthttp.StatusCreated)
	return adminapi.MintedKey{Token: token, Key: keyView(k)}, nil
}

// GET /v1/accounts/{id}/keys
func (s *Server) listKeys(ctx *fasthttp.RequestCtx) (any, error) {
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	ks, err := s.db.ListKeys(httpapi.Context(ctx), a.ID)
	if err != nil {
		return nil, err
	}
	out := adminapi.KeyList{Keys: make([]adminapi.Key, 0, len(ks))}
	for _, k := range ks {
		out.Keys = append(out.Keys, keyView(k))
	}
	return out, nil
}

// validPrefix reports whether p has the form of a key prefix.
func validPrefix(p string) bool {
	if len(p) != storage.KeyPrefixLen {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// POST /v1/keys/{prefix}/revoke
//
// Revoking a revoked key is a 409, so that a typo'd prefix that happens to
// name an old key does not pass for success.
func (s *Server) revokeKey(ctx *fasthttp.RequestCtx) (any, error) {
	prefix, _ := ctx.UserValue("prefix").(string)
	if !validPrefix(prefix) {
		// Not echoed: an operator may have pasted a whole key.
		msg := fmt.Sprintf("not a key prefix: %d characters of a-z and 0-9, the part after svc_live_", storage.KeyPrefixLen)
		return nil, badRequest(msg, adminapi.Issue{Path: "prefix", Message: msg})
	}
	k, err := s.db.LookupKey(httpapi.Context(ctx), prefix)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, notFound("no key with prefix %q", prefix)
	}
	if err != nil {
		return nil, err
	}
	if k.Revoked {
		return nil, &adminapi.Error{Code: adminapi.CodeConflict,
			Message: fmt.Sprintf("key %s was already revoked at %s", prefix, k.RevokedAt.Format("2006-01-02T15:04:05Z07:00")),
			Details: map[string]any{"revokedAt": k.RevokedAt}}
	}
	k, err = s.db.RevokeKey(httpapi.Context(ctx), prefix)
	if err != nil {
		return nil, err
	}
	keysRevoked.Inc()
	s.log.Info("API key revoked", append([]any{"account", k.Account, "prefix", k.Prefix}, peerAttrs(ctx)...)...)
	return keyView(k), nil
}

func secretView(a storage.Account) adminapi.WebhookSecret {
	return adminapi.WebhookSecret{Account: a.ID, Secret: a.WebhookSecret, RotatedAt: a.SecretRotatedAt}
}

// GET /v1/accounts/{id}/webhook-secret
func (s *Server) webhookSecret(ctx *fasthttp.RequestCtx) (any, error) {
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	noStore(ctx)
	return secretView(a), nil
}

// POST /v1/accounts/{id}/webhook-secret/rotate
func (s *Server) rotateWebhookSecret(ctx *fasthttp.RequestCtx) (any, error) {
	id := pathID(ctx)
	a, err := s.db.RotateWebhookSecret(httpapi.Context(ctx), id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, notFound("no account %q", id)
	}
	if err != nil {
		return nil, err
	}
	webhookRotations.Inc()
	s.log.Info("webhook secret rotated", append([]any{"account", a.ID}, peerAttrs(ctx)...)...)
	noStore(ctx)
	return secretView(a), nil
}

// POST /v1/signing-keys/rotate
func (s *Server) rotateSigningKey(ctx *fasthttp.RequestCtx) (any, error) {
	prev := s.keys.ActiveKid()
	kid, err := s.keys.Rotate()
	if err != nil {
		return nil, err
	}
	signingRotations.Inc()
	s.log.Info("receipt signing key rotated", append([]any{"kid", kid, "previous", prev}, peerAttrs(ctx)...)...)
	return adminapi.SigningKeyRotated{Kid: kid, Previous: prev}, nil
}

// GET /v1/signing-keys: the JWKS plus "active".
func (s *Server) signingKeys(*fasthttp.RequestCtx) (any, error) {
	// The set is read before the active kid: a rotation in between gives
	// a kid the set lacks, and reading again gives both new.
	for range 3 {
		jwks := s.keys.JWKS()
		active := s.keys.ActiveKid()
		pub, err := receipt.ParseJWKS(jwks)
		if err != nil {
			return nil, fmt.Errorf("cannot read the key set: %w", err)
		}
		if _, ok := pub.Key(active); !ok {
			continue
		}
		set := adminapi.SigningKeys{Active: active}
		if err := json.Unmarshal(jwks, &set); err != nil {
			return nil, fmt.Errorf("cannot read the key set: %w", err)
		}
		return set, nil
	}
	return nil, errors.New("the key set kept changing while being read")
}
