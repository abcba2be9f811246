// Package phase times the parts of a probe: where a validation's time goes,
// from the wait for a worker to the last SMTP reply, one histogram per
// part,
//
//	verifyd_probe_phase_seconds{phase="..."}
//
// so that a benchmark (verifybench's probe-time breakdown) or an operator
// can tell waiting from working: queue, mx, host_ip, handoff and egress
// are waits for a resource of verifyd's own; connect to quit are the network and the
// remote server; auth_wait is the auth signals a verdict waits for after
// its SMTP stage; hold and charge are the API's synced writes around the
// probe (server/validate.go). Phases are timed with the wall clock, whatever clock the
// caller's logic runs on: they are measurements, not decisions.
package phase

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Phase is one part of a probe.
type Phase uint8

// The phases, in the order a probe meets them.
const (
	Queue    Phase = iota // waiting for a probe worker
	MX                    // the domain's MX lookup
	HostIP                // an MX host's address lookup
	Handoff               // waiting for another validation's session to the MX address to be handed over
	Egress                // waiting for an egress address's slot for the MX
	Connect               // the TCP connect
	Banner                // from connected to the 220 greeting
	EHLO                  // EHLO (and HELO) round trips
	StartTLS              // STARTTLS, the handshake and EHLO again
	Rcpt                  // MAIL and the recipients' RCPTs
	Extra                 // the catch-all and role-mailbox RCPTs
	Quit                  // QUIT, when the probe waits for it (a session that met trouble)
	AuthWait              // the auth signals, awaited after the SMTP stage
	Hold                  // the API: holding the credit before the probe
	Charge                // the API: charging it with the result, signing
	numPhases
)

var names = [numPhases]string{"queue", "mx", "host_ip", "handoff", "egress", "connect", "banner", "ehlo", "starttls",
	"rcpt", "extra_rcpt", "quit", "auth_wait", "hold", "charge"}

// String returns the phase's label.
func (p Phase) String() string {
	if p < numPhases {
		return names[p]
	}
	return "unknown"
}

// Names lists the phases' labels in order.
func Names() []string { return names[:] }

var hists [numPhases]*metrics.Histogram

func init() {
	for p := range hists {
		hists[p] = metrics.NewHistogram(fmt.Sprintf(`verifyd_probe_phase_seconds{phase=%q}`, names[p]))
	}
}

// Observe records d for p.
func Observe(p Phase, d time.Duration) {
	if p < numPhases {
		hists[p].Update(d.Seconds())
	}
}

// Since records the time from start to now for p.
func Since(p Phase, start time.Time) { Observe(p, time.Since(start)) }
