package probe

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/internal/phase"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/probe/authsig"
	"github.com/verifyd/verifyd/probe/lists"
	"github.com/verifyd/verifyd/probe/typo"
	"github.com/verifyd/verifyd/resolver"
)

// Options configures an Engine.
type Options struct {
	// Resolver answers every DNS question of the engine. Required.
	Resolver resolver.Interface
	// Egress leases the source address of every SMTP session. Required.
	Egress *egress.Pool
	// Lists returns the current lists (a lists.Store's Get); default the
	// embedded lists.
	Lists func() *lists.Lists
	// Typos, when set, suggests the address a person meant when the
	// domain they typed receives no mail and is a typing slip of one that
	// does (Result.DidYouMean; package typo). Nil: no suggestions.
	Typos *typo.Suggester
	// SMTPPort is the MX port. Default 25.
	SMTPPort int
	// HeloName is sent in EHLO when the egress address has no name of its
	// own (egress.Pool.HeloName gives each session's). Required.
	HeloName string
	// MailFrom is the reverse-path of the probes. Default verify@ the
	// session's HELO name, so that the sender's domain matches the name of
	// the address it comes from.
	MailFrom string
	// CommandTimeout bounds each SMTP reply; SessionTimeout a whole
	// session. Defaults 30 s and 2 min; the caller's context bounds both.
	CommandTimeout time.Duration
	SessionTimeout time.Duration
	// GreetingTimeout bounds the wait for an MX's greeting, which servers
	// may delay (RFC 5321 §4.5.3.2.1 allows 5 minutes; tarpits use that).
	// Default 60 s, never less than CommandTimeout; the caller's context
	// (15 s for a real-time validation) still bounds it.
	GreetingTimeout time.Duration
	// MaxMXHosts caps the MX addresses one validation connects to, in
	// preference order (as Postfix's smtp_mx_address_limit); a domain with
	// twenty MX hosts that all fail costs five connections, not twenty.
	// Default DefaultMaxMXHosts.
	MaxMXHosts int
	// BatchShare is how many batch domains may be probed at once while
	// real-time validations are in flight (the others wait their turn):
	// real-time work, which a person waits for, has the first claim on
	// the CPU and the network. Default DefaultBatchShare; negative: no
	// limit. It is the most: the share adapts below it to real-time
	// pressure (see BatchSchedTarget).
	BatchShare int
	// BatchSchedTarget and BatchQueueTarget are the adaptive batch
	// share's pressure signals: while real-time traffic is active, the
	// Go scheduler's mean latency (runnable goroutines waiting for a CPU)
	// over an interval above BatchSchedTarget, or a real-time validation that
	// waited longer than BatchQueueTarget for a worker, shrinks the share.
	// Defaults DefaultBatchSchedTarget and DefaultBatchQueueTarget;
	// negative turns a signal off.
	BatchSchedTarget time.Duration
	BatchQueueTarget time.Duration
	// StartTLS makes sessions use STARTTLS when the MX offers it
	// (opportunistic, RFC 7435: certificates are not verified, a failed
	// handshake is retried without TLS).
	StartTLS bool
	// CatchAllTTL is how long a domain's catch-all finding is reused.
	// Default 24 h. CatchAllEntries bounds that cache; default 100,000.
	CatchAllTTL     time.Duration
	CatchAllEntries int
	// Auth, when set, collects the domain's authentication and
	// deliverability signals (Result.Auth, spec §2.6) concurrently with the
	// SMTP stage, and the SMTP sessions probe abuse@ and postmaster@ for
	// it. nil: no auth signals, and no extra RCPT. The engine does not
	// close it.
	Auth *authsig.Collector
	// Facts, when set, is the knowledge a fleet's boxes share: catch-all
	// findings and providers learnt from greetings (see Facts). nil on one
	// box.
	Facts Facts
	// NoSessionReuse makes every real-time validation open a session of
	// its own and QUIT it, instead of taking one an earlier validation to
	// the same MX address left open (reuse.go).
	NoSessionReuse bool
	// Now is the engine's clock; default time.Now.
	Now func() time.Time
	// Logger receives the engine's lines and, at debug level, SMTP
	// transcripts; default slog.Default().
	Logger *slog.Logger
}

// DefaultMaxMXHosts is Options.MaxMXHosts's default: Postfix's
// smtp_mx_address_limit.
const DefaultMaxMXHosts = 5

// Defaults of Options, the daemon's too (cmd/verifyd/config takes them):
// SMTP port 25, 30 s per command, 2 min per session, a domain's catch-all
// finding kept a day.
const (
	DefaultSMTPPort       = 25
	DefaultCommandTimeout = 30 * time.Second
	DefaultSessionTimeout = 2 * time.Minute
	DefaultCatchAllTTL    = 24 * time.Hour
)

// DefaultGreetingTimeout is Options.GreetingTimeout's default.
const DefaultGreetingTimeout = 60 * time.Second

// Engine validates addresses. It is safe for concurrent use; callers bound
// the concurrency (verifyd runs it on ants pools) and each call's time (the
// context's deadline is the probe's budget).
type Engine struct {
	opts     Options
	log      *slog.Logger
	catchAll *catchAllCache
	// knownGood is a recipient each MX host accepted recently, for the
	// positive control (control.go).
	knownGood knownGood
	// learnt is the providers the fleet learnt from greetings (nil on
	// one box).
	learnt *learntProviders
	// quits counts the sessions whose QUIT goes on after their probe
	// answered (Wait).
	quits sync.WaitGroup
	share *share
	// keeper holds the sessions real-time validations left open for the
	// next (reuse.go); nil when Options.NoSessionReuse.
	keeper *keeper
	// tlsSessions holds a TLS session ticket per MX host name, so that
	// the next STARTTLS to the host resumes instead of a full handshake.
	tlsSessions tls.ClientSessionCache
}

// tlsSessionHosts bounds Engine.tlsSessions: the MX hosts a box talks to
// most (the big providers' few names carry most of the traffic); a host
// that fell out only costs a full handshake.
const tlsSessionHosts = 4096

// DefaultBatchShare is Options.BatchShare's default: enough batch sessions
// to keep a batch moving at a few thousand addresses a second beside
// real-time traffic, few enough that a batch burst leaves room for it.
const DefaultBatchShare = 64

// Wait ends the sessions kept open for more validations (and keeps none
// after) and waits for the sessions still saying QUIT after their probes
// answered: each is bounded by the command timeout.
func (e *Engine) Wait() {
	if e.keeper != nil {
		e.keeper.close()
	}
	e.quits.Wait()
}

// New returns an Engine.
func New(opts Options) (*Engine, error) {
	var errs []error
	if opts.Resolver == nil {
		errs = append(errs, errors.New("a resolver is required"))
	}
	if opts.Egress == nil {
		errs = append(errs, errors.New("an egress pool is required"))
	}
	if opts.HeloName == "" {
		errs = append(errs, errors.New("a HELO name is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	if opts.Lists == nil {
		opts.Lists = lists.Embedded
	}
	if opts.SMTPPort == 0 {
		opts.SMTPPort = DefaultSMTPPort
	}
	if opts.CommandTimeout == 0 {
		opts.CommandTimeout = DefaultCommandTimeout
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.GreetingTimeout == 0 {
		opts.GreetingTimeout = DefaultGreetingTimeout
	}
	opts.GreetingTimeout = max(opts.GreetingTimeout, opts.CommandTimeout)
	if opts.MaxMXHosts <= 0 {
		opts.MaxMXHosts = DefaultMaxMXHosts
	}
	if opts.BatchShare == 0 {
		opts.BatchShare = DefaultBatchShare
	}
	if opts.CatchAllTTL == 0 {
		opts.CatchAllTTL = DefaultCatchAllTTL
	}
	if opts.CatchAllEntries == 0 {
		opts.CatchAllEntries = 100000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{
		opts:     opts,
		log:      opts.Logger.With("pkg", "probe"),
		catchAll: newCatchAllCache(opts.CatchAllEntries, opts.CatchAllTTL, opts.Facts, opts.Logger.With("pkg", "probe")),
		share:    newShare(max(opts.BatchShare, 0), limiterOptions{SchedTarget: opts.BatchSchedTarget, QueueTarget: opts.BatchQueueTarget}),
	}
	if opts.StartTLS {
		e.tlsSessions = tls.NewLRUClientSessionCache(tlsSessionHosts)
	}
	if !opts.NoSessionReuse {
		e.keeper = &keeper{e: e, wait: idleSession, handoff: handoffWait}
		opts.Egress.OnWait(e.keeper.wanted)
	}
	if opts.Facts != nil {
		e.learnt = &learntProviders{facts: opts.Facts, writer: e.catchAll.writer, log: e.log, m: map[string]learnt{}}
	}
	return e, nil
}

// Verify validates one address within ctx's deadline (the real-time
// budget). A greylisted recipient is retried from the same egress address
// once its cooldown ends, as long as the budget allows; otherwise the result
// is unknown with RetryAt set.
func (e *Engine) Verify(ctx context.Context, email string) *Result {
	return e.VerifyInput(ctx, address.NewInput(email))
}

// VerifyInput is Verify of an address already parsed (at the edge,
// address.NewInput): it is not parsed again.
func (e *Engine) VerifyInput(ctx context.Context, in address.Input) *Result {
	// A real-time validation's lookups go ahead of a batch's when they
	// wait for a resolver worker.
	ctx = resolver.Urgent(ctx)
	e.share.realtimeStart()
	defer e.share.realtimeEnd()
	start := e.opts.Now()
	r := &Result{Email: in.Email, ProbedAt: start}
	if in.Err != nil {
		r.DidYouMean = e.suggestLocal(ctx, in)
		return e.finish(r, start)
	}
	addr := in.Addr
	plan := e.plan(ctx, r, addr)
	auth := e.startAuth(plan, addr.ASCIIDomain, true)
	if plan.probe {
		e.probeOne(ctx, r, addr, plan.route)
	}
	e.joinAuth(ctx, auth, addr.ASCIIDomain, r)
	return e.finish(r, start)
}

// plan is what the stages before SMTP decided.
type plan struct {
	route route
	probe bool // an SMTP session is worth making
}

// wantsAuth reports whether the domain's auth signals are worth
// collecting: it will be probed, or it exists and takes no mail (startAuth).
func (p plan) wantsAuth() bool { return p.probe || p.route.outcome == DNSNoMX }

// plan runs the syntax, lists and MX stages for a parsed address and
// records their findings in r.
func (e *Engine) plan(ctx context.Context, r *Result, addr address.Address) plan {
	ev := &r.Evidence
	ev.SyntaxOK = true
	r.Email = addr.String()
	r.Checks.Syntax = true
	r.Checks.Domain = addr.Domain
	l := e.opts.Lists()
	ev.Role = l.IsRole(addr.Local)
	ev.Free = l.IsFree(addr.ASCIIDomain)
	ev.Disposable = l.IsDisposable(addr.ASCIIDomain)
	ev.Spamtrap = l.IsSpamtrap(addr.Rcpt())
	r.Checks.IsRoleBased = ev.Role
	r.Checks.IsFreeProvider = ev.Free
	r.Checks.IsDisposable = ev.Disposable

	t := time.Now()
	rt := e.route(ctx, addr.ASCIIDomain)
	phase.Since(phase.MX, t)
	ev.DNS = rt.outcome
	r.Checks.MX = rt.outcome == DNSRouted
	if len(rt.hosts) > 0 {
		r.Checks.MXHost = rt.hosts[0]
	}
	// A typing slip is pointed out only when the domain typed takes no
	// mail: a domain that does is never corrected, even one registered
	// to catch mistyped mail and on the disposable list (its verdict,
	// disposable, says what matters), since nothing in DNS tells it from
	// a company's real domain one letter from a provider's.
	if e.opts.Typos != nil && rt.outcome.takesNoMail() {
		r.DidYouMean = e.suggest(ctx, addr)
	}
	// A spamtrap is never probed (probing traps is what gets senders
	// listed), nor is a disposable domain: the verdict is already decided.
	return plan{route: rt, probe: rt.outcome == DNSRouted && !ev.Spamtrap && !ev.Disposable}
}

// suggest is the address meant, when addr's domain, which receives no
// mail, is a typing slip of one that does: the candidate's MX is looked
// up (the route's lookups, cached like any other) and must route. A
// domain that receives mail never gets here (plan), so a suggestion
// costs it nothing; the rest pay at most one candidate's lookups.
func (e *Engine) suggest(ctx context.Context, addr address.Address) *DidYouMean {
	var extra []string
	if f, _ := ctx.Value(typoTargetsKey{}).(TypoTargets); f != nil {
		extra = f(ctx)
	}
	s, ok := e.opts.Typos.Suggest(addr.ASCIIDomain, extra...)
	if !ok || !e.suggestionRoutes(ctx, s.Domain) {
		return nil
	}
	return &DidYouMean{Email: addr.Local + "@" + s.Domain, Domain: s.Domain, Slip: s.Kind, TLD: s.TLD}
}

// suggestionRoutes reports whether the domain suggested takes mail (its
// MX routes), and counts the suggestion made or given up.
func (e *Engine) suggestionRoutes(ctx context.Context, domain string) bool {
	if e.route(ctx, domain).outcome != DNSRouted {
		typoSuggestions.noMail.Inc()
		return false
	}
	typoSuggestions.made.Inc()
	return true
}

// takesNoMail reports whether a domain of this outcome is certain to take
// no mail: it does not exist, or it has no MX host (null MX included).
func (o DNSOutcome) takesNoMail() bool { return o == DNSNXDomain || o == DNSNoMX }

// suggestLocal is the address meant when in failed to parse for stray
// dots in its local part alone (ann.@gmail.com, ann..lee@gmail.com,
// .ann@gmail.com) and its domain is one of the large providers of
// Options.Typos, or a slip of one that takes no mail: their local parts
// are letters, digits and dots between them (Google's and Microsoft's
// rules for a new address; Gmail does not even read the dots), so the
// mailbox meant is plain to read. Elsewhere a stray dot is left alone
// (the verdict, invalid syntax, stands): a company's local parts follow
// no rule known here. The provider's MX must route.
func (e *Engine) suggestLocal(ctx context.Context, in address.Input) *DidYouMean {
	if e.opts.Typos == nil {
		return nil
	}
	at := strings.LastIndexByte(in.Email, '@')
	if at <= 0 {
		return nil
	}
	local := in.Email[:at]
	fixed := strings.Trim(local, ".")
	for strings.Contains(fixed, "..") {
		fixed = strings.ReplaceAll(fixed, "..", ".")
	}
	if fixed == local || fixed == "" {
		return nil
	}
	fin := address.NewInput(fixed + in.Email[at:])
	if fin.Err != nil {
		return nil // something else is wrong too
	}
	domain := fin.Addr.ASCIIDomain
	d := &DidYouMean{Domain: domain, Local: true}
	if !e.opts.Typos.Known(domain) {
		s, ok := e.opts.Typos.Suggest(domain)
		if !ok {
			return nil
		}
		if !e.route(ctx, domain).outcome.takesNoMail() {
			return nil // the domain typed takes mail: never corrected
		}
		d.Domain, d.Slip, d.TLD = s.Domain, s.Kind, s.TLD
	}
	if !e.suggestionRoutes(ctx, d.Domain) {
		return nil
	}
	d.Email = fin.Addr.Local + "@" + d.Domain
	return d
}

// TypoTargets returns more domains a typed one may be a slip of, beside
// Options.Typos' own: the domains an account's validations found
// receiving mail. It is called only when a suggestion is looked for (the
// typed domain takes no mail), so what it costs is not paid by the
// addresses whose domain receives mail.
type TypoTargets func(ctx context.Context) []string

type typoTargetsKey struct{}

// WithTypoTargets returns ctx carrying f: the probes run under it look
// for slips of f's domains too (Result.DidYouMean). Without Options.Typos
// it has no effect.
func WithTypoTargets(ctx context.Context, f TypoTargets) context.Context {
	return context.WithValue(ctx, typoTargetsKey{}, f)
}

// finish decides the verdict and fills the derived fields.
func (e *Engine) finish(r *Result, start time.Time) *Result {
	r.Status, r.Reason, r.Score = Decide(r.Evidence)
	r.Checks.Reason = r.Reason
	r.Checks.IsCatchAll = r.Evidence.CatchAll == CatchAllYes && r.Evidence.SMTP == SMTPAccepted
	r.Latency = e.opts.Now().Sub(start)
	countResult(r)
	if e.log.Enabled(context.Background(), slog.LevelDebug) {
		e.logResult(r)
	}
	return r
}

// logResult writes the debug line of one probe: its verdict, the MX, the
// provider it was recognised as, and the session's facts. At well over a
// thousand probes a second it is for debugging, not for the info log.
func (e *Engine) logResult(r *Result) {
	attrs := []slog.Attr{
		slog.String("email", r.Email),
		slog.String("status", string(r.Status)),
		slog.String("reason", string(r.Reason)),
		slog.Int("score", r.Score),
		slog.String("mx", r.Checks.MXHost),
		slog.String("provider", cmp.Or(r.Session.Provider, ProviderNone)),
		slog.Duration("latency", r.Latency),
	}
	if r.Session.MXIP.IsValid() {
		attrs = append(attrs, slog.String("mx_ip", r.Session.MXIP.String()))
	}
	if r.Egress.IsValid() {
		attrs = append(attrs, slog.String("egress", r.Egress.String()))
	}
	if r.Session.TLSVersion != "" {
		attrs = append(attrs, slog.String("tls", r.Session.TLSVersion))
	}
	if !r.RetryAt.IsZero() {
		attrs = append(attrs, slog.Time("retry_at", r.RetryAt))
	}
	e.log.LogAttrs(context.Background(), slog.LevelDebug, "probe", attrs...)
}

// tlsConfig is the opportunistic TLS of a session to host.
func (e *Engine) tlsConfig(host string) *tls.Config {
	if !e.opts.StartTLS {
		return nil
	}
	return &tls.Config{
		ServerName: host,
		// Opportunistic TLS (RFC 7435): a prober learns nothing from a
		// certificate check and must still reach MXes with self-signed
		// or mismatched certificates, as senders do.
		InsecureSkipVerify: true, //nolint:gosec // see above
		// Any version beats the clear text the session falls back to
		// (RFC 7435 §3): old MXes that speak only TLS 1.0 still get it,
		// and Result.Session says what was negotiated.
		MinVersion: tls.VersionTLS10, //nolint:gosec // see above
		// X25519 alone: Go's default hybrid X25519MLKEM768 costs several
		// times the CPU per handshake, and a probe carries no secret that
		// needs post-quantum protection.
		CurvePreferences: []tls.CurveID{tls.X25519},
		// Resumption (RFC 8446 §2.2; session tickets, RFC 5077, before
		// TLS 1.3): the next session to host skips the certificate and
		// its signature check, about half of the handshake's CPU
		// (probe/README.md, "Sessions"). The cache is keyed by
		// ServerName: one entry per MX host.
		ClientSessionCache: e.tlsSessions,
	}
}

// transcriptLogger returns the logger for SMTP transcripts: only when debug
// logging is on, so a transcript costs nothing otherwise.
func (e *Engine) transcriptLogger() *slog.Logger {
	if e.log.Enabled(context.Background(), slog.LevelDebug) {
		return e.log
	}
	return nil
}
