package world

import (
	"errors"
	"log/slog"
	"time"
)

// Options says where a started world listens.
type Options struct {
	// DNSAddr is the DNS server's "ip:port"; "127.0.0.1:0" picks a port.
	// Default DefaultDNSAddr.
	DNSAddr string
	// SMTPPort overrides the world's SMTP port; -1 picks a free port.
	SMTPPort int
	// RDAPAddr, when set, starts the world's RDAP server on that loopback
	// "ip:port" ("127.0.0.1:0" picks a port); empty for none.
	RDAPAddr string
	// WHOISAddr, when set, starts the world's WHOIS server on that loopback
	// "ip:port" ("127.0.0.1:0" picks a port); empty for none.
	WHOISAddr string
	// Now is the SMTP servers' clock (greylisting); default time.Now.
	Now func() time.Time
	// Logger receives debug lines of the servers; default none.
	Logger *slog.Logger
}

// DefaultDNSAddr is where mailworld serves DNS unless told otherwise.
const DefaultDNSAddr = "127.0.53.1:1053"

// Running is a started world.
type Running struct {
	World *World
	DNS   *DNSServer
	SMTP  *SMTPServers
	// RDAP and WHOIS are nil unless Options asked for them.
	RDAP  *RDAPServer
	WHOIS *WHOISServer
}

// Start brings up w's DNS server and SMTP hosts, and its RDAP and WHOIS
// servers when Options names their addresses. w must have passed Defaults
// and Validate (Load, Parse and Generate see to that).
func Start(w *World, opts Options) (*Running, error) {
	if opts.DNSAddr == "" {
		opts.DNSAddr = DefaultDNSAddr
	}
	d, err := StartDNS(w, opts.DNSAddr)
	if err != nil {
		return nil, err
	}
	r := &Running{World: w, DNS: d}
	if r.SMTP, err = StartSMTP(w, SMTPOptions{Port: opts.SMTPPort, Now: opts.Now, Logger: opts.Logger}); err != nil {
		r.SMTP = nil
		return nil, errors.Join(err, r.Close())
	}
	if opts.RDAPAddr != "" {
		if r.RDAP, err = StartRDAP(w, opts.RDAPAddr); err != nil {
			r.RDAP = nil
			return nil, errors.Join(err, r.Close())
		}
	}
	if opts.WHOISAddr != "" {
		if r.WHOIS, err = StartWHOIS(w, opts.WHOISAddr); err != nil {
			r.WHOIS = nil
			return nil, errors.Join(err, r.Close())
		}
	}
	return r, nil
}

// Log returns the SMTP session log.
func (r *Running) Log() *SessionLog { return r.SMTP.Log() }

// Close stops every server of the world and waits for them.
func (r *Running) Close() error {
	var errs []error
	if r.WHOIS != nil {
		errs = append(errs, r.WHOIS.Close())
	}
	if r.RDAP != nil {
		errs = append(errs, r.RDAP.Close())
	}
	if r.SMTP != nil {
		errs = append(errs, r.SMTP.Close())
	}
	errs = append(errs, r.DNS.Close())
	return errors.Join(errs...)
}
