package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"time"
)

// Options configures a Pool. Call Defaults to fill the unset fields, then
// Validate; New does both on its own copy.
type Options struct {
	// Addresses are the source addresses SMTP sessions bind to. IPv4-mapped
	// IPv6 addresses are taken as IPv4. Empty: one unnamed "system" address
	// (the zero netip.Addr), with which the kernel picks the source; it
	// serves both families.
	Addresses []netip.Addr
	// HeloNames are names of addresses of their own (helo.go); HeloName is
	// the one name of every address without one (empty: each uses its
	// PTR name, found by the self-check); DefaultHeloName is the name of
	// last resort (the host's name).
	HeloNames       map[netip.Addr]string
	HeloName        string
	DefaultHeloName string
	// MaxConnsPerHost caps concurrent sessions per (egress address, MX
	// address). Default 4.
	MaxConnsPerHost int
	// MaxRatePerHost caps new sessions per second per MX address, all
	// egress addresses together: a token bucket holding max(1, rate)
	// tokens. Default 20; negative: no rate cap.
	MaxRatePerHost float64
	// GreylistCooldown is the first cooldown of an (egress address, MX
	// address) pair after a greylisting, rate-limiting or policy reply. It
	// doubles with each repeat on the pair, up to MaxCooldown; a completed
	// session (OutcomeOK) resets it. Default 1 min.
	GreylistCooldown time.Duration
	// MaxCooldown caps the cooldown backoff. A pair that goes MaxCooldown
	// past the end of its cooldown without a new one starts over at
	// GreylistCooldown. Default 30 min.
	MaxCooldown time.Duration
	// ConnectTimeout bounds the TCP connect of Lease.DialContext (the
	// context's deadline, when earlier, wins). Default 30 s.
	ConnectTimeout time.Duration
	// An address earns an EventReputation when, within PolicyBlockWindow,
	// policy blocks (OutcomePolicy) came from at least PolicyBlockThreshold
	// distinct destinations, ended at least ReputationShare of its
	// sessions, and that share is at least twice the rest of the pool's
	// (reputation.go). Defaults 3, 10 min and 0.05.
	PolicyBlockThreshold int
	PolicyBlockWindow    time.Duration
	ReputationShare      float64
	// SaveInterval is the period of the background loop: it saves the
	// state to Store when it changed, forgets idle destinations and
	// refreshes the active cooldown gauge. Default 10 s.
	SaveInterval time.Duration
	// Now is the clock of cooldowns, the rate limit and the health
	// window; default time.Now.
	Now func() time.Time
	// Sleep waits d, or until ctx ends, for a rate token; default a timer.
	// Tests pair a fake Sleep that advances a fake Now.
	Sleep func(ctx context.Context, d time.Duration) error
	// Store keeps cooldowns and health counters across restarts; nil: the
	// state is not kept.
	Store Store
	// OnEvent, when set, is called with each Event, without any lock of
	// the pool held, on the goroutine that caused it (usually the one
	// calling Lease.Release). It must not block: hand the event off.
	OnEvent func(Event)
	// Logger receives the package's log lines; default slog.Default().
	Logger *slog.Logger
}

// Store keeps the pool's state across restarts: the cooldowns not yet
// expired and the health counters, as one opaque JSON document.
// LoadEgressState returns nil (and no error) when nothing was saved.
type Store interface {
	LoadEgressState() ([]byte, error)
	SaveEgressState([]byte) error
}

// Defaults for Options.
const (
	DefaultMaxConnsPerHost      = 4
	DefaultMaxRatePerHost       = 20
	DefaultGreylistCooldown     = time.Minute
	DefaultMaxCooldown          = 30 * time.Minute
	DefaultConnectTimeout       = 30 * time.Second
	DefaultPolicyBlockThreshold = 3
	DefaultPolicyBlockWindow    = 10 * time.Minute
	DefaultReputationShare      = 0.05
	DefaultSaveInterval         = 10 * time.Second
)

// Defaults fills the unset (zero) fields of o with their defaults.
func (o *Options) Defaults() {
	if o.MaxConnsPerHost == 0 {
		o.MaxConnsPerHost = DefaultMaxConnsPerHost
	}
	if o.MaxRatePerHost == 0 {
		o.MaxRatePerHost = DefaultMaxRatePerHost
	}
	if o.GreylistCooldown == 0 {
		o.GreylistCooldown = DefaultGreylistCooldown
	}
	if o.MaxCooldown == 0 {
		o.MaxCooldown = max(DefaultMaxCooldown, o.GreylistCooldown)
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.PolicyBlockThreshold == 0 {
		o.PolicyBlockThreshold = DefaultPolicyBlockThreshold
	}
	if o.PolicyBlockWindow == 0 {
		o.PolicyBlockWindow = DefaultPolicyBlockWindow
	}
	if o.ReputationShare == 0 {
		o.ReputationShare = DefaultReputationShare
	}
	if o.SaveInterval == 0 {
		o.SaveInterval = DefaultSaveInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem of o at once. It expects Defaults to have
// run: zero values where a positive one is needed are reported.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("egress: "+format, a...)) }
	if _, err := normalizeAddrs(o.Addresses); err != nil {
		errs = append(errs, err)
	}
	if o.MaxConnsPerHost < 1 {
		add("max_conns_per_host must be at least 1, not %d", o.MaxConnsPerHost)
	}
	if math.IsNaN(o.MaxRatePerHost) || o.MaxRatePerHost == 0 {
		add("max_rate_per_host must be positive (or negative for no cap), not %v", o.MaxRatePerHost)
	}
	if o.GreylistCooldown <= 0 {
		add("greylist_cooldown must be positive, not %v", o.GreylistCooldown)
	}
	if o.MaxCooldown < o.GreylistCooldown {
		add("max_cooldown must be at least greylist_cooldown (%v), not %v", o.GreylistCooldown, o.MaxCooldown)
	}
	if o.ConnectTimeout <= 0 {
		add("connect_timeout must be positive, not %v", o.ConnectTimeout)
	}
	if o.PolicyBlockThreshold < 1 {
		add("policy_block_threshold must be at least 1, not %d", o.PolicyBlockThreshold)
	}
	if !(o.ReputationShare >= 0 && o.ReputationShare <= 1) { // NaN too
		add("reputation_share must be between 0 and 1, not %v", o.ReputationShare)
	}
	if o.PolicyBlockWindow <= 0 {
		add("policy_block_window must be positive, not %v", o.PolicyBlockWindow)
	}
	if o.SaveInterval <= 0 {
		add("save_interval must be positive, not %v", o.SaveInterval)
	}
	if o.Now == nil {
		add("now must be set")
	}
	if o.Sleep == nil {
		add("sleep must be set")
	}
	if o.Logger == nil {
		add("logger must be set")
	}
	return errors.Join(errs...)
}

// normalizeAddrs checks a list of pool addresses and returns it with
// IPv4-mapped addresses unmapped; an empty list becomes the system address.
// Every problem is reported at once.
func normalizeAddrs(addrs []netip.Addr) ([]netip.Addr, error) {
	if len(addrs) == 0 {
		return []netip.Addr{{}}, nil
	}
	var errs []error
	out := make([]netip.Addr, 0, len(addrs))
	seen := make(map[netip.Addr]bool, len(addrs))
	for i, a := range addrs {
		u := a.Unmap()
		var problem string
		switch {
		case !a.IsValid():
			problem = "not an IP address"
		case a.Zone() != "":
			problem = "has a zone"
		case u.IsUnspecified(), u.IsMulticast():
			problem = "not a unicast address"
		case seen[u]:
			problem = "listed twice"
		}
		if problem != "" {
			errs = append(errs, fmt.Errorf("egress: addresses[%d] %s: %s", i, a, problem))
			continue
		}
		seen[u] = true
		out = append(out, u)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// sleep is the default Options.Sleep.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
