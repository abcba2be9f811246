package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/verifyd/verifyd/dnsbl"
	"github.com/verifyd/verifyd/resolver"
)

// SelfCheckOptions configures the egress self-check.
type SelfCheckOptions struct {
	Resolver resolver.Interface
	// Pool is the egress pool; it knows the HELO name of each address
	// (Pool.HeloName) and learns the PTR names found here.
	Pool *Pool
	// DNSBLZones are the block lists every egress address is checked on,
	// as configured (any case, a trailing dot, U-labels); a zone that is
	// not a domain name of two labels or more is not asked.
	DNSBLZones []string
	// Enforce takes failing addresses out of rotation (and back in once
	// they pass); without it findings are only reported.
	Enforce bool
	Logger  *slog.Logger
}

// selfCheckPrefix marks the disable reasons the self-check set, so that
// it re-enables only what it disabled.
const selfCheckPrefix = "self-check: "

// SelfCheck checks every named egress address of the pool, as receiving
// MTAs will judge it: a reverse DNS name (PTR) that resolves back to the
// address (forward-confirmed rDNS), the HELO name among those names, and no
// listing on the configured DNS block lists. An address whose HELO name is
// not configured (neither its own nor smtp.helo_name) takes its first
// forward-confirmed PTR name as its HELO name (Pool.SetDiscoveredHelo),
// so a pool whose addresses each have their own PTR passes with no HELO
// name configured at all (RFC 5782 return codes; list
// operators' error codes are not listings). It returns the findings per
// address (an empty slice for one that passed). With Enforce, a failing
// address is disabled in the pool, which emits the pool's event (and so a
// reputation warning), unless it is the last active address: then it is
// only reported, since a pool with no address cannot probe at all. An
// address the self-check disabled is enabled again once it passes.
func SelfCheck(ctx context.Context, o SelfCheckOptions) map[netip.Addr][]string {
	selfCheckRuns.Inc()
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	out := map[netip.Addr][]string{}
	snap := o.Pool.Snapshot()
	active := 0
	for _, s := range snap {
		if !s.Disabled && !s.Draining {
			active++
		}
	}
	for _, s := range snap {
		if !s.Addr.IsValid() || s.Draining {
			continue // the system's address is not ours to name
		}
		findings := checkAddr(ctx, o, s.Addr)
		out[s.Addr] = findings
		o.Pool.SetFindings(s.Addr, findings)
		ours := s.Disabled && strings.HasPrefix(s.DisabledReason, selfCheckPrefix)
		switch {
		case len(findings) > 0:
			selfCheckFailing.Inc()
			log.Warn("egress self-check failed", "addr", s.Addr, "findings", strings.Join(findings, "; "))
			if !o.Enforce || s.Disabled {
				continue
			}
			if active <= 1 {
				log.Error("egress address fails its self-check but is the last active one; kept in rotation", "addr", s.Addr)
				continue
			}
			if err := o.Pool.Disable(s.Addr, selfCheckPrefix+strings.Join(findings, "; ")); err == nil {
				active--
				selfCheckDisabled.Inc()
			}
		case ours:
			if err := o.Pool.Enable(s.Addr); err == nil {
				log.Info("egress address passes its self-check again", "addr", s.Addr)
			}
		}
	}
	return out
}

// checkAddr returns what is wrong with one egress address; a lookup that
// fails temporarily is not a finding (the next run decides).
func checkAddr(ctx context.Context, o SelfCheckOptions, addr netip.Addr) []string {
	var findings []string
	names, confirmed, err := confirmedPTR(ctx, o.Resolver, addr)
	switch {
	case errors.Is(err, resolver.ErrNXDomain), errors.Is(err, resolver.ErrNoData):
		findings = append(findings, "no reverse DNS (PTR) name")
		o.Pool.SetDiscoveredHelo(addr, "")
	case err != nil:
	default:
		if len(confirmed) == 0 {
			findings = append(findings, fmt.Sprintf("reverse DNS %v does not resolve back to the address", names))
			o.Pool.SetDiscoveredHelo(addr, "")
		} else {
			o.Pool.SetDiscoveredHelo(addr, confirmed[0])
		}
		helo, _ := o.Pool.HeloName(addr)
		match := false
		for _, name := range names {
			match = match || strings.EqualFold(strings.TrimSuffix(name, "."), helo)
		}
		if !match {
			findings = append(findings, fmt.Sprintf("HELO name %s is not a reverse DNS name of the address %v", helo, names))
		}
	}
	for _, zone := range o.DNSBLZones {
		z, err := resolver.Normalize(zone)
		if err != nil || !strings.Contains(z, ".") {
			continue
		}
		q, err := dnsbl.Name(addr, z)
		if err != nil {
			continue
		}
		res, err := o.Resolver.LookupIP(ctx, "ip4", q)
		if err != nil {
			continue // NXDOMAIN: not listed; a failure: unknown
		}
		listed, err := dnsbl.Classify(res.IPs)
		if err == nil && listed {
			findings = append(findings, "listed on "+zone)
		}
	}
	return findings
}

// confirmedPTR looks up addr's PTR names and returns them, and those that
// resolve back to addr (forward-confirmed reverse DNS), in the PTR's order.
func confirmedPTR(ctx context.Context, r resolver.Interface, addr netip.Addr) (names, confirmed []string, err error) {
	ptr, err := r.LookupPTR(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range ptr.Names {
		ips, err := r.LookupIP(ctx, "ip", name)
		if err != nil {
			continue
		}
		for _, ip := range ips.IPs {
			if ip.Unmap() == addr.Unmap() {
				confirmed = append(confirmed, strings.TrimSuffix(strings.ToLower(name), "."))
				break
			}
		}
	}
	return ptr.Names, confirmed, nil
}

// DiscoverHeloNames gives every named address of the pool its first
// forward-confirmed PTR name as HELO name, without judging anything: for a
// verifyd whose self-check is off. An address with a configured name
// keeps it.
func DiscoverHeloNames(ctx context.Context, o SelfCheckOptions) {
	for _, s := range o.Pool.Snapshot() {
		if !s.Addr.IsValid() || s.Draining {
			continue
		}
		if _, confirmed, err := confirmedPTR(ctx, o.Resolver, s.Addr); err == nil && len(confirmed) > 0 {
			o.Pool.SetDiscoveredHelo(s.Addr, confirmed[0])
		}
	}
}

// RunSelfChecks runs SelfCheck now and then every interval until ctx ends.
func RunSelfChecks(ctx context.Context, every time.Duration, o SelfCheckOptions) {
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		SelfCheck(cctx, o)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
