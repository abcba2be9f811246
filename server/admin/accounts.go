package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/storage"
)

// Limits of the account routes.
const (
	// MaxNameBytes is the longest account name (and key label, and ledger
	// note), as storage enforces it.
	MaxNameBytes = 200
	// MaxCredits bounds one add or set, and a balance an add may reach:
	// far above any real balance, far below int64 overflow.
	MaxCredits = 1_000_000_000_000
	// DefaultLedgerLimit and MaxLedgerLimit bound a ledger page.
	DefaultLedgerLimit = 20
	MaxLedgerLimit     = 1000
)

// plans lists storage's plans for error messages (storage.Plan.Valid is
// the check).
var plans = []storage.Plan{storage.PlanFree, storage.PlanStarter, storage.PlanGrowth, storage.PlanScale, storage.PlanEnterprise}

func planList() string {
	s := make([]string, len(plans))
	for i, p := range plans {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// pathID is the {id} of the route.
func pathID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue("id").(string)
	return id
}

// account returns the account of the path, or a 404.
func (s *Server) account(ctx *fasthttp.RequestCtx) (storage.Account, error) {
	id := pathID(ctx)
	a, err := s.db.GetAccount(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return a, notFound("no account %q", id)
	}
	return a, err
}

// accountView is the account as the admin API shows it: with its credits,
// without its webhook secret.
func (s *Server) accountView(ctx context.Context, a storage.Account) (adminapi.Account, error) {
	c, err := s.db.Credits(ctx, a.ID)
	if err != nil {
		return adminapi.Account{}, err
	}
	return adminapi.Account{
		ID:                     a.ID,
		Name:                   a.Name,
		Plan:                   string(a.Plan),
		CreatedAt:              a.CreatedAt,
		Balance:                c.Balance,
		Held:                   c.Held,
		WebhookSecretRotatedAt: a.SecretRotatedAt,
	}, nil
}

func checkPlan(is *issues, plan string) {
	if !storage.Plan(plan).Valid() {
		if plan == "" {
			is.add("plan", "is required (%s)", planList())
		} else {
			is.add("plan", "must be one of %s, not %q", planList(), plan)
		}
	}
}

func checkNote(is *issues, path, note string) {
	if len(note) > MaxNameBytes {
		is.add(path, "must be at most %d bytes, not %d", MaxNameBytes, len(note))
	} else if !checkText(note) {
		is.add(path, "must be printable UTF-8 text")
	}
}

// POST /v1/accounts {name, plan, credits?}
func (s *Server) createAccount(ctx *fasthttp.RequestCtx) (any, error) {
	var req adminapi.CreateAccount
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	var is issues
	name := strings.TrimSpace(req.Name)
	switch {
	case name == "":
		is.add("name", "is required")
	case len(name) > MaxNameBytes:
		is.add("name", "must be at most %d bytes, not %d", MaxNameBytes, len(name))
	case !checkText(name):
		is.add("name", "must be printable UTF-8 text")
	}
	checkPlan(&is, req.Plan)
	switch {
	case req.Credits < 0:
		is.add("credits", "must not be negative")
	case req.Credits > MaxCredits:
		is.add("credits", "must be at most %d", int64(MaxCredits))
	}
	if err := is.err(); err != nil {
		return nil, err
	}
	a, err := s.db.CreateAccount(ctx, name, storage.Plan(req.Plan))
	if err != nil {
		return nil, err
	}
	accountsCreated.Inc()
	s.log.Info("account created", append([]any{"account", a.ID, "plan", a.Plan, "credits", req.Credits}, peerAttrs(ctx)...)...)
	if req.Credits > 0 {
		if _, err := s.db.AddCredits(ctx, a.ID, req.Credits, "initial credits"); err != nil {
			return nil, fmt.Errorf("account %s was created, but adding its %d initial credits failed (add them with verifyctl credits add): %w", a.ID, req.Credits, err)
		}
	}
	v, err := s.accountView(ctx, a)
	if err != nil {
		return nil, err
	}
	ctx.SetStatusCode(fasthttp.StatusCreated)
	return v, nil
}

// GET /v1/accounts
func (s *Server) listAccounts(ctx *fasthttp.RequestCtx) (any, error) {
	as, err := s.db.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	out := adminapi.AccountList{Accounts: make([]adminapi.Account, 0, len(as))}
	for _, a := range as {
		v, err := s.accountView(ctx, a)
		if err != nil {
			return nil, err
		}
		out.Accounts = append(out.Accounts, v)
	}
	return out, nil
}

// GET /v1/accounts/{id}
func (s *Server) getAccount(ctx *fasthttp.RequestCtx) (any, error) {
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	return s.accountView(ctx, a)
}

// POST /v1/accounts/{id}/plan {plan}
func (s *Server) setPlan(ctx *fasthttp.RequestCtx) (any, error) {
	var req adminapi.SetPlan
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	var is issues
	checkPlan(&is, req.Plan)
	if err := is.err(); err != nil {
		return nil, err
	}
	old, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	a, err := s.db.SetPlan(ctx, old.ID, storage.Plan(req.Plan))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, notFound("no account %q", old.ID)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("account plan changed", append([]any{"account", a.ID, "from", old.Plan, "to", a.Plan}, peerAttrs(ctx)...)...)
	return s.accountView(ctx, a)
}

// POST /v1/accounts/{id}/credits {add: n} or {set: n}, note?
func (s *Server) adjustCredits(ctx *fasthttp.RequestCtx) (any, error) {
	var req adminapi.AdjustCredits
	if err := DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	var is issues
	switch {
	case req.Add == nil && req.Set == nil:
		is.add("", "one of add and set is required")
	case req.Add != nil && req.Set != nil:
		is.add("", "give add or set, not both")
	case req.Add != nil && *req.Add <= 0:
		is.add("add", "must be positive")
	case req.Add != nil && *req.Add > MaxCredits:
		is.add("add", "must be at most %d", int64(MaxCredits))
	case req.Set != nil && *req.Set < 0:
		is.add("set", "must not be negative")
	case req.Set != nil && *req.Set > MaxCredits:
		is.add("set", "must be at most %d", int64(MaxCredits))
	}
	checkNote(&is, "note", req.Note)
	if err := is.err(); err != nil {
		return nil, err
	}
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	var e storage.Entry
	if req.Add != nil {
		c, err := s.db.Credits(ctx, a.ID)
		if err != nil {
			return nil, err
		}
		if c.Balance > MaxCredits-*req.Add {
			return nil, badRequest(fmt.Sprintf("the balance would exceed %d", int64(MaxCredits)),
				adminapi.Issue{Path: "add", Message: fmt.Sprintf("the balance is %d; it would exceed %d", c.Balance, int64(MaxCredits))})
		}
		e, err = s.db.AddCredits(ctx, a.ID, *req.Add, req.Note)
		if err != nil {
			return nil, err
		}
	} else {
		e, err = s.db.SetCredits(ctx, a.ID, *req.Set, req.Note)
		if err != nil {
			return nil, err
		}
	}
	s.log.Info("credits changed", append([]any{"account", a.ID, "kind", e.Kind, "amount", e.Amount,
		"delta", e.Delta, "balance", e.Balance, "seq", e.Seq}, peerAttrs(ctx)...)...)
	return adminapi.CreditsChanged{Account: a.ID, Balance: e.Balance, Held: e.Held, Entry: entryView(e)}, nil
}

func entryView(e storage.Entry) adminapi.LedgerEntry {
	return adminapi.LedgerEntry{
		Seq: e.Seq, Time: e.Time, Kind: e.Kind.String(), Amount: e.Amount, Delta: e.Delta,
		Balance: e.Balance, Held: e.Held, HoldSeq: e.HoldSeq, Ref: e.Ref, Note: e.Note,
	}
}

// GET /v1/accounts/{id}/ledger?limit=&before=
//
// The newest entries first, up to limit (default 20, at most 1000), with
// seq below before when given; next_before pages on to older ones.
func (s *Server) ledger(ctx *fasthttp.RequestCtx) (any, error) {
	var is issues
	limit := DefaultLedgerLimit
	args := ctx.QueryArgs()
	if v := args.Peek("limit"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > MaxLedgerLimit {
			is.add("limit", "must be an integer from 1 to %d", MaxLedgerLimit)
		}
		limit = n
	}
	var before uint64
	if v := args.Peek("before"); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil || n < 1 {
			is.add("before", "must be a positive integer (a ledger seq)")
		}
		before = n
	}
	if err := is.err(); err != nil {
		return nil, err
	}
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.db.Credits(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	last, err := lastLedgerSeq(ctx, s.db, a.ID)
	if err != nil {
		return nil, err
	}
	upper := last
	if before > 0 {
		upper = min(upper, before-1)
	}
	out := adminapi.Ledger{Account: a.ID, Balance: c.Balance, Held: c.Held, Entries: []adminapi.LedgerEntry{}}
	if upper == 0 {
		return out, nil
	}
	from := uint64(0)
	if upper > uint64(limit) {
		from = upper - uint64(limit)
	}
	es, err := s.db.Ledger(ctx, a.ID, from, limit)
	if err != nil {
		return nil, err
	}
	for _, e := range slices.Backward(es) {
		if e.Seq <= upper {
			out.Entries = append(out.Entries, entryView(e))
		}
	}
	if n := len(out.Entries); n > 0 && out.Entries[n-1].Seq > 1 {
		next := out.Entries[n-1].Seq
		out.NextBefore = &next
	}
	return out, nil
}

// lastLedgerSeq returns the seq of the account's newest ledger entry, 0
// when it has none. storage.Ledger reads forward only, so this searches:
// Ledger(after, 1) is empty exactly when after ≥ the last seq, and an
// exponential then binary search finds that bound in 2·log2(n) seeks of
// one entry each, instead of reading the whole ledger.
func lastLedgerSeq(ctx context.Context, db Store, account string) (uint64, error) {
	beyond := func(after uint64) (bool, error) {
		es, err := db.Ledger(ctx, account, after, 1)
		return len(es) > 0, err
	}
	more, err := beyond(0)
	if err != nil || !more {
		return 0, err
	}
	lo, hi := uint64(0), uint64(1) // beyond(lo) is true; beyond(hi) unknown
	for {
		more, err := beyond(hi)
		if err != nil {
			return 0, err
		}
		if !more {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 { // beyond(lo) true, beyond(hi) false
		mid := lo + (hi-lo)/2
		more, err := beyond(mid)
		if err != nil {
			return 0, err
		}
		if more {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}
