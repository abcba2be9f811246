package egress

import (
	"net/netip"
	"strings"
	"sync"
)

// The HELO name of each address. Receiving MTAs compare the name a client
// gives in EHLO with the reverse DNS of its address (FCrDNS), so in a pool
// whose addresses have a PTR each (probe1, probe2, ...) every address must
// say its own name. The name a session uses, first found wins:
//
//  1. the address's own configured name (HeloNames: egress.helo_names, or
//     the content of its verifyd-egress@ADDR file), source "config";
//  2. the one name for every address (HeloName: smtp.helo_name), for pools
//     behind one NAT name, source "global";
//  3. the address's forward-confirmed PTR name, found by the self-check
//     (SetDiscoveredHelo), source "ptr";
//  4. DefaultHeloName (the host's name), source "default".
//
// The system address (no address of the pool's own) skips 1 and 3.

// HELO name sources, as AddrStatus.HeloSource gives them.
const (
	HeloFromConfig  = "config"
	HeloFromGlobal  = "global"
	HeloFromPTR     = "ptr"
	HeloFromDefault = "default"
)

// heloNames holds the names of 1 and 3; 2 and 4 are in Options.
type heloNames struct {
	mu         sync.RWMutex
	configured map[netip.Addr]string
	discovered map[netip.Addr]string
}

func normalizeHelo(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// HeloName is the name a session from addr says in EHLO, and where it
// comes from (the HeloFrom constants).
func (p *Pool) HeloName(addr netip.Addr) (name, source string) {
	addr = addr.Unmap()
	p.helo.mu.RLock()
	defer p.helo.mu.RUnlock()
	if n := p.helo.configured[addr]; n != "" && addr.IsValid() {
		return n, HeloFromConfig
	}
	if p.opts.HeloName != "" {
		return p.opts.HeloName, HeloFromGlobal
	}
	if n := p.helo.discovered[addr]; n != "" && addr.IsValid() {
		return n, HeloFromPTR
	}
	return p.opts.DefaultHeloName, HeloFromDefault
}

// HeloName is the name the leased session says in EHLO (Pool.HeloName).
func (l *Lease) HeloName() string {
	n, _ := l.p.HeloName(l.src.addr)
	return n
}

// SetHeloNames replaces the configured per-address names (a reload).
// Names are lower-cased, without a trailing dot; an empty one is no name.
func (p *Pool) SetHeloNames(names map[netip.Addr]string) {
	m := make(map[netip.Addr]string, len(names))
	for a, n := range names {
		if n = normalizeHelo(n); n != "" {
			m[a.Unmap()] = n
		}
	}
	p.helo.mu.Lock()
	p.helo.configured = m
	p.helo.mu.Unlock()
}

// SetDiscoveredHelo records addr's forward-confirmed PTR name (the
// self-check finds it); "" forgets it.
func (p *Pool) SetDiscoveredHelo(addr netip.Addr, name string) {
	addr = addr.Unmap()
	name = normalizeHelo(name)
	p.helo.mu.Lock()
	defer p.helo.mu.Unlock()
	if p.helo.discovered == nil {
		p.helo.discovered = map[netip.Addr]string{}
	}
	if name == "" {
		delete(p.helo.discovered, addr)
		return
	}
	p.helo.discovered[addr] = name
}

// HeloConfigured reports whether addr's HELO name is set by configuration
// (its own or the global one), so that the self-check must judge that name
// against the address's PTR; otherwise the name is the PTR's own.
func (p *Pool) HeloConfigured(addr netip.Addr) bool {
	_, src := p.HeloName(addr)
	return src == HeloFromConfig || src == HeloFromGlobal
}
