package harness

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// WorldOptions are the generator's settings for a run (mailworld -gen).
type WorldOptions struct {
	Domains  int           `json:"domains"`
	Seed     uint64        `json:"seed"`
	Latency  time.Duration `json:"latency_ns"`
	Jitter   time.Duration `json:"jitter_ns,omitempty"`
	STARTTLS float64       `json:"starttls"`
	CatchAll float64       `json:"catchall"`
	Greylist float64       `json:"greylist"`
	Tarpit   float64       `json:"tarpit"`
	Auth     float64       `json:"auth"`
	// Disposable domains are made and expected disposable; they must be on
	// verifyd's shipped disposable list.
	Disposable string `json:"disposable,omitempty"`
	// Profile is mailworld's -profile: "" or world.ProfileRealWorld (the
	// fractions above are then not used).
	Profile string `json:"profile,omitempty"`
	// Extra are further mailworld flags, passed as they are.
	Extra []string `json:"extra,omitempty"`
	// DNS is the address mailworld serves DNS on; port 0 picks one.
	DNS string `json:"dns"`
	// Stats, when set, is the loopback "ip:port" mailworld serves its
	// session log's counters on (-stats), for World.Stats.
	Stats string `json:"-"`
}

// args returns mailworld's command line.
func (o WorldOptions) args(expected, worldFile string) []string {
	a := []string{
		"-gen",
		"-domains", strconv.Itoa(o.Domains),
		"-seed", strconv.FormatUint(o.Seed, 10),
		"-latency", o.Latency.String(),
		"-jitter", o.Jitter.String(),
		"-starttls", ftoa(o.STARTTLS),
		"-catchall", ftoa(o.CatchAll),
		"-greylist", ftoa(o.Greylist),
		"-tarpit", ftoa(o.Tarpit),
		"-auth", ftoa(o.Auth),
		"-write-expected", expected,
		"-write-world", worldFile,
		"-dns", o.DNS,
		"-smtp-port", "-1", // a free port, reported on stderr
	}
	if o.Disposable != "" {
		a = append(a, "-disposable", o.Disposable)
	}
	if o.Profile != "" {
		a = append(a, "-profile", o.Profile)
	}
	if o.Stats != "" {
		a = append(a, "-stats", o.Stats)
	}
	return append(a, o.Extra...)
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// World is a running mailworld and its expected verdicts.
type World struct {
	Proc     *Proc
	DNS      string
	SMTPPort int
	Domains  int
	Hosts    int
	Expected []world.Expectation
	// Expect maps a lower-cased address to its expectation.
	Expect map[string]world.Expectation
	// W is the generated world, as mailworld saved it.
	W *world.World
	// StatsAddr is where mailworld serves its session counters; empty
	// when it was not asked to.
	StatsAddr string
}

// Stats reads the world's session counters (mailworld -stats).
func (w *World) Stats(ctx context.Context) (world.LogStats, error) {
	if w.StatsAddr == "" {
		return world.LogStats{}, fmt.Errorf("mailworld serves no session counters")
	}
	return world.FetchStats(ctx, w.StatsAddr)
}

// mailworldServesStats reports whether the mailworld binary bin has the
// -stats flag (one built before it has not).
func mailworldServesStats(ctx context.Context, bin string) bool {
	out, _ := exec.CommandContext(ctx, bin, "-h").CombinedOutput()
	return strings.Contains(string(out), "-stats")
}

// Slow reports whether the world holds a probe of email for seconds by
// design: a host that never sends its banner or a zone that drops queries
// (expected reason timeout), or greylisting of the domain or the mailbox
// (the probe waits out the cooldown and retries). Their latency is the
// world's, not verifyd's; the report shows percentiles without them too.
func (w *World) Slow(email string) bool {
	e, ok := w.Expect[lower(email)]
	if !ok || e.Reason == world.ReasonTimeout {
		return true
	}
	at := strings.LastIndexByte(email, '@')
	d := w.W.Domain(email[at+1:])
	if d == nil {
		return true
	}
	return d.Policy == world.PolicyGreylist || d.Mailboxes[lower(email[:at])] == world.MailboxGreylist
}

var servingRE = regexp.MustCompile(`serving (\d+) domains: DNS on (\S+) \(udp\+tcp\), (\d+) SMTP hosts on port (\d+)`)

// StartWorld generates and serves a world with mailworld, in dir.
func StartWorld(ctx context.Context, procs *Procs, bin, dir string, o WorldOptions) (*World, error) {
	expected := filepath.Join(dir, "expected.jsonl")
	worldFile := filepath.Join(dir, "world.json")
	found := make(chan []string, 1)
	p, err := StartProc("mailworld", bin, o.args(expected, worldFile), dir, nil, func(line string) {
		if m := servingRE.FindStringSubmatch(line); m != nil {
			select {
			case found <- m:
			default:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	procs.Add(p)
	m, err := waitLine(ctx, p, found, 2*time.Minute, "where it serves")
	if err != nil {
		return nil, err
	}
	w := &World{Proc: p, DNS: m[2], StatsAddr: o.Stats}
	w.Domains, _ = strconv.Atoi(m[1])
	w.Hosts, _ = strconv.Atoi(m[3])
	w.SMTPPort, _ = strconv.Atoi(m[4])
	if w.Expected, err = world.ReadExpectations(expected); err != nil {
		return nil, err
	}
	if w.W, err = world.Load(worldFile); err != nil {
		return nil, err
	}
	if len(w.Expected) == 0 {
		return nil, fmt.Errorf("mailworld wrote no expected addresses to %s", expected)
	}
	w.Expect = make(map[string]world.Expectation, len(w.Expected))
	for _, e := range w.Expected {
		w.Expect[lower(e.Email)] = e
	}
	return w, nil
}

// Plain reports whether the world answers a probe of email at its plain
// pace: not Slow, and every MX host of its domain takes connections
// normally (no tarpit, refusal, 421 or deferral on a host tried first
// that makes the probe wait or move on).
func (w *World) Plain(email string) bool {
	if w.Slow(email) {
		return false
	}
	d := w.W.Domain(email[strings.LastIndexByte(email, '@')+1:])
	if d == nil || len(d.MX) == 0 {
		return false
	}
	for _, mx := range d.MX {
		if h := w.W.HostByName(mx.Host); h == nil || h.Mode != world.HostNormal {
			return false
		}
	}
	return true
}
