package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxResponseBytes bounds what the client reads of one answer.
const MaxResponseBytes = 16 << 20

// Client talks to the admin API over its unix socket. Its methods are safe
// for concurrent use.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client for the admin socket at path. It dials only
// that socket, whatever host a URL names.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:          2,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		DisableCompression:    true,
	}
	return &Client{socket: path, hc: &http.Client{Transport: tr}}
}

// Socket is the socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// Close closes idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Do sends a request to path (e.g. "/v1/accounts") with in as its JSON body
// (nil: none) and decodes a 2xx answer into out (nil: discard; *[]byte:
// the raw body). A non-2xx answer is an *Error; failing to reach the
// socket is a *ConnError.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("adminapi: cannot encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://verifyd"+path, body)
	if err != nil {
		return fmt.Errorf("adminapi: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return &ConnError{Socket: c.socket, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return &ConnError{Socket: c.socket, Err: err}
	}
	if len(data) > MaxResponseBytes {
		return fmt.Errorf("adminapi: answer of %s %s is over %d bytes", method, path, MaxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var env Envelope
		if err := json.Unmarshal(data, &env); err != nil || env.Error == nil || env.Error.Code == "" {
			return &Error{Status: resp.StatusCode, Code: CodeInternal,
				Message: fmt.Sprintf("HTTP %d without an error envelope: %.200q", resp.StatusCode, data)}
		}
		env.Error.Status = resp.StatusCode
		return env.Error
	}
	switch out := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*out = data
		return nil
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("adminapi: cannot decode the answer of %s %s: %w", method, path, err)
		}
		return nil
	}
}

// ConnError is a failure to reach the admin socket or to read from it.
type ConnError struct {
	Socket string
	Err    error
}

func (e *ConnError) Error() string {
	var ue *url.Error
	err := e.Err
	if errors.As(err, &ue) {
		err = ue.Err // "Post \"http://verifyd/…\":" says nothing useful
	}
	return fmt.Sprintf("cannot reach verifyd's admin socket %s: %v", e.Socket, err)
}

func (e *ConnError) Unwrap() error { return e.Err }

func accountPath(id string, rest string) string {
	return "/v1/accounts/" + url.PathEscape(id) + rest
}

// CreateAccount creates an account (POST /v1/accounts).
func (c *Client) CreateAccount(ctx context.Context, req CreateAccount) (Account, error) {
	var a Account
	err := c.Do(ctx, http.MethodPost, "/v1/accounts", req, &a)
	return a, err
}

// Accounts lists every account (GET /v1/accounts).
func (c *Client) Accounts(ctx context.Context) ([]Account, error) {
	var l AccountList
	err := c.Do(ctx, http.MethodGet, "/v1/accounts", nil, &l)
	return l.Accounts, err
}

// Account returns one account (GET /v1/accounts/{id}).
func (c *Client) Account(ctx context.Context, id string) (Account, error) {
	var a Account
	err := c.Do(ctx, http.MethodGet, accountPath(id, ""), nil, &a)
	return a, err
}

// SetPlan changes an account's plan (POST /v1/accounts/{id}/plan).
func (c *Client) SetPlan(ctx context.Context, id, plan string) (Account, error) {
	var a Account
	err := c.Do(ctx, http.MethodPost, accountPath(id, "/plan"), SetPlan{Plan: plan}, &a)
	return a, err
}

// AdjustCredits adds credits or sets the balance (POST
// /v1/accounts/{id}/credits).
func (c *Client) AdjustCredits(ctx context.Context, id string, req AdjustCredits) (CreditsChanged, error) {
	var r CreditsChanged
	err := c.Do(ctx, http.MethodPost, accountPath(id, "/credits"), req, &r)
	return r, err
}

// Ledger returns up to limit of the account's newest ledger entries with
// seq below before (0: from the newest; limit 0: the server's default).
func (c *Client) Ledger(ctx context.Context, id string, limit int, before uint64) (Ledger, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if before > 0 {
		q.Set("before", strconv.FormatUint(before, 10))
	}
	p := accountPath(id, "/ledger")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var l Ledger
	err := c.Do(ctx, http.MethodGet, p, nil, &l)
	return l, err
}

// MintKey mints an API key (POST /v1/accounts/{id}/keys). The answer holds
// the key string, which is never shown again.
func (c *Client) MintKey(ctx context.Context, id string, req MintKey) (MintedKey, error) {
	var k MintedKey
	err := c.Do(ctx, http.MethodPost, accountPath(id, "/keys"), req, &k)
	return k, err
}

// Keys lists an account's keys (GET /v1/accounts/{id}/keys).
func (c *Client) Keys(ctx context.Context, id string) ([]Key, error) {
	var l KeyList
	err := c.Do(ctx, http.MethodGet, accountPath(id, "/keys"), nil, &l)
	return l.Keys, err
}

// RevokeKey revokes the key with that prefix (POST /v1/keys/{prefix}/revoke).
func (c *Client) RevokeKey(ctx context.Context, prefix string) (Key, error) {
	var k Key
	err := c.Do(ctx, http.MethodPost, "/v1/keys/"+url.PathEscape(prefix)+"/revoke", nil, &k)
	return k, err
}

// WebhookSecret returns an account's webhook secret (GET
// /v1/accounts/{id}/webhook-secret).
func (c *Client) WebhookSecret(ctx context.Context, id string) (WebhookSecret, error) {
	var s WebhookSecret
	err := c.Do(ctx, http.MethodGet, accountPath(id, "/webhook-secret"), nil, &s)
	return s, err
}

// RotateWebhookSecret gives the account a new webhook secret (POST
// /v1/accounts/{id}/webhook-secret/rotate).
func (c *Client) RotateWebhookSecret(ctx context.Context, id string) (WebhookSecret, error) {
	var s WebhookSecret
	err := c.Do(ctx, http.MethodPost, accountPath(id, "/webhook-secret/rotate"), nil, &s)
	return s, err
}

// RotateSigningKey makes a new receipt signing key the active one (POST
// /v1/signing-keys/rotate).
func (c *Client) RotateSigningKey(ctx context.Context) (SigningKeyRotated, error) {
	var r SigningKeyRotated
	err := c.Do(ctx, http.MethodPost, "/v1/signing-keys/rotate", nil, &r)
	return r, err
}

// SigningKeys returns the published key set (GET /v1/signing-keys): raw,
// a JWKS receipt.Verify reads, and parsed.
func (c *Client) SigningKeys(ctx context.Context) ([]byte, SigningKeys, error) {
	var raw []byte
	if err := c.Do(ctx, http.MethodGet, "/v1/signing-keys", nil, &raw); err != nil {
		return nil, SigningKeys{}, err
	}
	var sk SigningKeys
	if err := json.Unmarshal(raw, &sk); err != nil {
		return nil, SigningKeys{}, fmt.Errorf("adminapi: cannot decode the key set: %w", err)
	}
	return raw, sk, nil
}

// AddUser creates a dashboard user (POST /v1/users).
func (c *Client) AddUser(ctx context.Context, req AddUser) (User, error) {
	var u User
	err := c.Do(ctx, http.MethodPost, "/v1/users", req, &u)
	return u, err
}

// Users lists every dashboard user (GET /v1/users).
func (c *Client) Users(ctx context.Context) ([]User, error) {
	var l UserList
	err := c.Do(ctx, http.MethodGet, "/v1/users", nil, &l)
	return l.Users, err
}

// SetOperator grants or withdraws the operator role of a user, named by
// id or email (POST /v1/users/{id}/operator).
func (c *Client) SetOperator(ctx context.Context, user string, on bool) (User, error) {
	var u User
	err := c.Do(ctx, http.MethodPost, "/v1/users/"+url.PathEscape(user)+"/operator", SetOperator{Operator: on}, &u)
	return u, err
}

// CreateInvite makes a one-time invitation to an account (POST
// /v1/accounts/{id}/invites); the token is in the answer only.
func (c *Client) CreateInvite(ctx context.Context, id string, req CreateInvite) (Invite, error) {
	var iv Invite
	err := c.Do(ctx, http.MethodPost, accountPath(id, "/invites"), req, &iv)
	return iv, err
}

// Invites lists an account's pending invitations.
func (c *Client) Invites(ctx context.Context, id string) ([]Invite, error) {
	var l InviteList
	err := c.Do(ctx, http.MethodGet, accountPath(id, "/invites"), nil, &l)
	return l.Invites, err
}
