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
}

// Start brings up w's DNS server and SMTP hosts. w must have passed
// Defaults and Validate (Load, Parse and Generate see to that).
func Start(w *World, opts Options) (*Running, error) {
	if opts.DNSAddr == "" {
		opts.DNSAddr = DefaultDNSAddr
	}
	d, err := StartDNS(w, opts.DNSAddr)
	if err != nil {
		return nil, err
	}
	s, err := StartSMTP(w, SMTPOptions{Port: opts.SMTPPort, Now: opts.Now, Logger: opts.Logger})
	if err != nil {
		d.Close()
		return nil, err
	}
	return &Running{World: w, DNS: d, SMTP: s}, nil
}

// Log returns the SMTP session log.
func (r *Running) Log() *SessionLog { return r.SMTP.Log() }

// Close stops every server of the world and waits for them.
func (r *Running) Close() error {
	return errors.Join(r.SMTP.Close(), r.DNS.Close())
}
