package realmta

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/internal/leaktest"
	"github.com/verifyd/verifyd/internal/mtatest"
	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/resolver"
)

// The address plan: 127.35.0-9.x (internal/mtatest's own test uses
// 127.35.200.x, so both packages can run at once).
var (
	// dnsAddr is the world's DNS server: port 53, which the MTAs' C
	// library asks.
	dnsAddr = netip.MustParseAddr("127.35.0.53")
	// The engine's egress addresses. listedA and listedB are on the
	// world's block list dnsbl.test; cleanA and cleanB are not.
	listedA = netip.MustParseAddr("127.35.9.1")
	cleanA  = netip.MustParseAddr("127.35.9.2")
	cleanB  = netip.MustParseAddr("127.35.9.3")
	listedB = netip.MustParseAddr("127.35.9.4")
	// clean is the pool of a case that names none.
	clean = []netip.Addr{cleanA, cleanB}
)

// smtpPort is the MTAs' port: the real one.
const smtpPort = 25

// dnsbl is the world's DNS block list (RFC 5782).
const dnsbl = "dnsbl.test"

// heloName is the engine's EHLO name; its probes' MAIL FROM is
// verify@heloName.
const heloName = "prober.realmta.test"

// rawSender is the MAIL FROM of the plain sessions that record each
// case's reply: another sender than the engine's, so that greylisting
// (keyed on client, sender and recipient) treats the two apart.
const rawSender = "raw@realmta.test"

// A site is one MTA setup: its host (name and loopback address) and the
// domains whose MX it is.
type site struct {
	mta     mtatest.Kind
	setup   string
	ip      netip.Addr
	domains []string
}

func (s site) host() string { return "mx." + s.setup + "." + string(s.mta) + ".test" }

func (s site) addr() netip.AddrPort { return netip.AddrPortFrom(s.ip, smtpPort) }

// sites are every setup of every MTA; the world's DNS serves them all.
// 127.35.<n>.x: 1 Postfix, 2 Exim, 3 OpenSMTPD, 4 postgrey.
var sites = map[string]site{}

func addSite(s site) site {
	sites[string(s.mta)+"/"+s.setup] = s
	return s
}

// newWorld is the world the cases run in: a host per site, whose address
// nothing of the world's listens on (the MTA does), the sites' domains,
// and the block list.
func newWorld() (*world.World, error) {
	w := &world.World{DNSBL: []*world.DNSBLZone{{Zone: dnsbl, Listed: map[string]string{
		listedA.String(): "127.0.0.2", listedB.String(): "127.0.0.2",
	}}}}
	keys := make([]string, 0, len(sites))
	for k := range sites {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := sites[k]
		w.Hosts = append(w.Hosts, &world.Host{Name: s.host(), IP: s.ip.String(), Mode: world.HostRefuse})
		for _, d := range s.domains {
			w.Domains = append(w.Domains, &world.Domain{Name: d, MX: []world.MX{{Pref: 10, Host: s.host()}}})
		}
	}
	w.Defaults()
	return w, w.Validate()
}

// The run's shared state, set by TestMain.
var (
	sharedResolver *resolver.Resolver
	skipReason     string // why every case skips, when it does
)

// TestMain starts the world's DNS server and the shared resolver when the
// MTAs can run here, prints the table of cases in a verbose run, and fails
// the run when a goroutine of the project or a daemon is left once every
// test has cleaned up.
func TestMain(m *testing.M) {
	code := func() int {
		if _, err := mtatest.Available(); err != nil {
			skipReason = err.Error()
			return m.Run()
		}
		w, err := newWorld()
		if err != nil {
			fmt.Fprintln(os.Stderr, "realmta: world:", err)
			return 1
		}
		dns, err := world.StartDNS(w, netip.AddrPortFrom(dnsAddr, 53).String())
		if err != nil {
			fmt.Fprintln(os.Stderr, "realmta:", err)
			return 1
		}
		defer dns.Close()
		sharedResolver, err = resolver.New(resolver.Options{Upstreams: []string{dns.Addr()}, Timeout: 5 * time.Second,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			fmt.Fprintln(os.Stderr, "realmta:", err)
			return 1
		}
		defer sharedResolver.Close()
		return m.Run()
	}()
	if testing.Verbose() {
		printReport()
	}
	if code == 0 {
		if leaked := leaktest.Leaked(10 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind:\n%s\n", leaked)
			code = 1
		}
		if alive := mtatest.Alive(); len(alive) > 0 {
			fmt.Fprintf(os.Stderr, "daemons left running: %s\n", strings.Join(alive, "; "))
			code = 1
		}
	}
	os.Exit(code)
}

// needMTAs skips (or, with VERIFYD_MTA_TESTS=require, fails) t when the
// MTAs cannot run here.
func needMTAs(t *testing.T) {
	t.Helper()
	if skipReason == "" {
		return
	}
	if os.Getenv("VERIFYD_MTA_TESTS") == "require" {
		t.Fatalf("mtatest: %s (make mta unpacks the packages)", skipReason)
	}
	t.Skipf("mtatest: %s (make mta unpacks the packages; VERIFYD_MTA_TESTS=require fails instead)", skipReason)
}

// A verdict is a status and the reasons that may go with it: one, or
// several only where the MTA gives one reply for several causes (the
// case says why).
type verdict struct {
	status  probe.Status
	reasons []probe.Reason
}

func want(s probe.Status, r ...probe.Reason) verdict { return verdict{s, r} }

func (v verdict) String() string {
	rs := make([]string, len(v.reasons))
	for i, r := range v.reasons {
		rs[i] = string(r)
	}
	return string(v.status) + "/" + strings.Join(rs, " or ")
}

func (v verdict) matches(r *probe.Result) bool {
	if r.Status != v.status {
		return false
	}
	for _, reason := range v.reasons {
		if r.Reason == reason {
			return true
		}
	}
	return false
}

// Verdicts that recur.
var (
	valid           = want(probe.StatusValid, probe.ReasonOK)
	noMailbox       = want(probe.StatusInvalid, probe.ReasonMailboxNotFound)
	undeliverable   = want(probe.StatusInvalid, probe.ReasonSMTPRejected)
	full            = want(probe.StatusRisky, probe.ReasonSMTPRejected)
	blocked         = want(probe.StatusUnknown, probe.ReasonSMTPRejected)
	temporarilyNone = want(probe.StatusUnknown, probe.ReasonTimeout)
)

// A mtaCase is one address (or one batch of addresses of a domain) asked
// of one MTA setup: what the MTA answers, what that answer means, and so
// what the engine must conclude.
type mtaCase struct {
	name string
	// email is validated with Verify; batch, when set, with VerifyDomain
	// (each address with its own expectation) instead.
	email string
	batch []batchAddr
	// pool is the engine's egress addresses; default clean.
	pool []netip.Addr
	// budget bounds the validation (Verify's context); default 15 s,
	// probe.realtime_budget's default.
	budget time.Duration
	// raw are the RCPTs of the plain session that records the MTA's reply
	// (default: email), sent from rawFrom (default: pool[0]); reply must
	// match the reply to the last one: the reply the source documents.
	raw     []string
	rawFrom netip.Addr
	reply   string
	// want is the expected verdict, unset for a case that only records a
	// reply (rawOnly); source says where the expectation comes from.
	want    verdict
	rawOnly bool
	source  string
	// logged, when set, must match the MTA's log once the engine is done:
	// evidence that the engine met what the case is about (a refusal of a
	// listed egress address).
	logged string
}

type batchAddr struct {
	email string
	want  verdict
}

// run records the MTA's reply to the case's RCPTs, checks it against the
// documented one, then validates with a new engine and compares.
func (c mtaCase) run(t *testing.T, s site, mx *mtatest.Daemon) {
	t.Helper()
	pool := c.pool
	if pool == nil {
		pool = clean
	}
	raw := c.raw
	if raw == nil {
		raw = []string{c.email}
	}
	from := c.rawFrom
	if !from.IsValid() {
		from = pool[0]
	}
	replies, err := ask(s.addr(), from, raw)
	reply := ""
	if len(replies) > 0 {
		reply = replies[len(replies)-1]
	}
	if len(replies) > 1 {
		t.Logf("%s: %s answered %q from %s (the RCPTs before it: %q)", c.name, s.host(), reply, from, replies[:len(replies)-1])
	} else {
		t.Logf("%s: %s answered %q from %s", c.name, s.host(), reply, from)
	}
	if err != nil {
		t.Fatalf("%s: the plain session: %v", c.name, err)
	}
	if !regexp.MustCompile(c.reply).MatchString(reply) {
		t.Errorf("%s: %s answered %q, not the documented %q: the expectation's source does not apply; fix the setup",
			c.name, s.host(), reply, c.reply)
	}
	if c.rawOnly {
		record(s, c.name, c.email, reply, "(reply recorded only)", "", true)
		return
	}
	eng, done := newEngine(t, pool)
	defer done()
	budget := c.budget
	if budget == 0 {
		budget = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if c.batch == nil {
		r := eng.Verify(ctx, c.email)
		ok := c.want.matches(r)
		record(s, c.name, c.email, reply, c.want.String(), got(r), ok)
		t.Logf("%s: %s: the engine says %s in %v (score %d, egress %s, evidence %+v)", c.name, c.email, got(r),
			r.Latency.Round(time.Millisecond), r.Score, r.Egress, r.Evidence)
		if !ok {
			t.Errorf("%s: %s: the engine says %s, want %s: %s answered %q, which means so by %s",
				c.name, c.email, got(r), c.want, s.host(), reply, c.source)
		}
	} else {
		emails := make([]string, len(c.batch))
		for i, b := range c.batch {
			emails[i] = b.email
		}
		rs := eng.VerifyDomain(ctx, emails, netip.Addr{})
		for i, b := range c.batch {
			r := rs[i]
			ok := b.want.matches(r)
			record(s, c.name, b.email, reply, b.want.String(), got(r), ok)
			t.Logf("%s: %s: the engine says %s (score %d, evidence %+v)", c.name, b.email, got(r), r.Score, r.Evidence)
			if !ok {
				t.Errorf("%s: %s: the engine says %s, want %s (%s)", c.name, b.email, got(r), b.want, c.source)
			}
		}
	}
	if c.logged != "" {
		eng.Wait()
		if !regexp.MustCompile(c.logged).MatchString(mx.Log()) {
			t.Errorf("%s: %s's log has no %q: the engine never met what the case is about", c.name, s.host(), c.logged)
		}
	}
}

func got(r *probe.Result) string { return string(r.Status) + "/" + string(r.Reason) }

// newEngine returns an engine of its own on the world's DNS, with an
// egress pool of addrs; done waits for its sessions and closes the pool.
func newEngine(t *testing.T, addrs []netip.Addr) (*probe.Engine, func()) {
	t.Helper()
	eng, _, done := newEngineWithPool(t, addrs)
	return eng, done
}

// newEngineWithPool is newEngine, with its egress pool.
func newEngineWithPool(t *testing.T, addrs []netip.Addr) (*probe.Engine, *egress.Pool, func()) {
	t.Helper()
	pool, err := egress.New(egress.Options{
		Addresses: addrs, HeloName: heloName, MaxRatePerHost: -1,
		// Greylisting lasts 2 s here (postgrey --delay=2): retry after 1 s,
		// then 2 s, as a greylisting host's first cooldowns.
		GreylistCooldown: time.Second, MaxCooldown: 2 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := probe.New(probe.Options{
		Resolver: sharedResolver, Egress: pool, SMTPPort: smtpPort, HeloName: heloName,
		CommandTimeout: 10 * time.Second, GreetingTimeout: 10 * time.Second, SessionTimeout: 30 * time.Second,
		StartTLS: true, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	return eng, pool, func() {
		eng.Wait()
		pool.Close()
	}
}

// ask opens a plain SMTP session from from to mx (no STARTTLS, no
// pipelining): EHLO, MAIL FROM:<rawSender>, each RCPT in turn, QUIT. It
// returns the reply to each RCPT, a multi-line reply's lines joined with
// " / ".
func ask(mx netip.AddrPort, from netip.Addr, rcpts []string) ([]string, error) {
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
	c, err := d.Dial("tcp", mx.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(c)
	read := func() (string, error) {
		var lines []string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return strings.Join(lines, " / "), err
			}
			l = strings.TrimRight(l, "\r\n")
			lines = append(lines, l)
			if len(l) < 4 || l[3] != '-' {
				return strings.Join(lines, " / "), nil
			}
		}
	}
	cmd := func(line string) (string, error) {
		if _, err := fmt.Fprintf(c, "%s\r\n", line); err != nil {
			return "", err
		}
		return read()
	}
	if g, err := read(); err != nil || !strings.HasPrefix(g, "220") {
		return nil, fmt.Errorf("greeting %q: %v", g, err)
	}
	if e, err := cmd("EHLO raw." + heloName); err != nil || !strings.HasPrefix(e, "250") {
		return nil, fmt.Errorf("EHLO: %q: %v", e, err)
	}
	if m, err := cmd("MAIL FROM:<" + rawSender + ">"); err != nil || !strings.HasPrefix(m, "250") {
		return nil, fmt.Errorf("MAIL: %q: %v", m, err)
	}
	var replies []string
	for _, rcpt := range rcpts {
		rep, err := cmd("RCPT TO:<" + rcpt + ">")
		if err != nil {
			return replies, fmt.Errorf("RCPT TO:<%s>: %v", rcpt, err)
		}
		replies = append(replies, rep)
	}
	_, _ = cmd("QUIT")
	return replies, nil
}

// The report: every case's reply, expectation and answer, printed at the
// end of a verbose run (go test -v).
var report struct {
	sync.Mutex
	rows [][7]string
}

func record(s site, name, email, reply, want, got string, ok bool) {
	mark := "ok"
	if !ok {
		mark = "FAILS"
	}
	report.Lock()
	defer report.Unlock()
	report.rows = append(report.rows, [7]string{string(s.mta), s.setup, name, email, reply, want, got + " " + mark})
}

func printReport() {
	report.Lock()
	defer report.Unlock()
	if len(report.rows) == 0 {
		return
	}
	sort.SliceStable(report.rows, func(i, j int) bool {
		a, b := report.rows[i], report.rows[j]
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		return a[1] < b[1]
	})
	fmt.Println("\n| MTA | setup | case | address | raw reply | expected | engine |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range report.rows {
		for i := range r {
			r[i] = strings.ReplaceAll(r[i], "|", `\|`)
		}
		fmt.Printf("| %s | %s | %s | %s | `%s` | %s | %s |\n", r[0], r[1], r[2], r[3], r[4], r[5], r[6])
	}
}

// runSetup starts a setup's MTA and runs its cases, each in parallel.
func runSetup(t *testing.T, s site, start func(testing.TB, mtatest.Config) *mtatest.Daemon, cfg mtatest.Config, cases []mtaCase) {
	t.Helper()
	cfg.Addr, cfg.Hostname, cfg.Nameserver = s.addr(), s.host(), dnsAddr
	mx := start(t, cfg)
	t.Logf("%s on %s (%s)", s.host(), s.addr(), strings.ReplaceAll(strings.TrimSpace(mtatest.Versions()), "\n", ", "))
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, s, mx)
			})
		}
	})
	t.Run("kept sessions", func(t *testing.T) { keptSessions(t, s, mx, cases) })
}

// keptSessions validates the setup's single addresses again, one after
// another, three rounds, with one engine: each validation may take the
// session the one before kept open (probe/reuse.go), so one session
// carries several transactions, refusals among them. Every verdict must
// still be the case's, and the MTA must have seen fewer sessions than
// validations. Cases about a block of the egress address, a greylisting,
// a temporary refusal or a batch are left out: their answers depend on
// the egress address's state, which the cases before them change.
func keptSessions(t *testing.T, s site, mx *mtatest.Daemon, cases []mtaCase) {
	var picked []mtaCase
	for _, c := range cases {
		if c.email == "" || c.batch != nil || c.pool != nil || c.rawOnly || c.logged != "" || c.budget != 0 ||
			c.want.status == probe.StatusUnknown {
			continue
		}
		picked = append(picked, c)
	}
	if len(picked) < 2 {
		return
	}
	eng, pool, done := newEngineWithPool(t, clean)
	n := 0
	for round := range 3 {
		for _, c := range picked {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			r := eng.Verify(ctx, c.email)
			cancel()
			n++
			if !c.want.matches(r) {
				t.Errorf("round %d, %s: %s: the engine says %s in a kept session, want %s (%s)", round+1, c.name, c.email, got(r), c.want, c.source)
			}
		}
	}
	done()
	var sessions uint64
	for _, a := range pool.Snapshot() {
		sessions += a.Sessions
	}
	t.Logf("%s: %d validations in %d sessions", s.host(), n, sessions)
	if sessions >= uint64(n) {
		t.Errorf("%s: %d validations one after another took %d sessions: none was kept for the next", s.host(), n, sessions)
	}
	// Postfix logs both: "too many errors after RCPT" at
	// smtpd_hard_error_limit, "improper command pipelining after X" when
	// a client sends ahead where RFC 2920 does not allow it.
	for _, bad := range []string{"too many errors", "improper command pipelining"} {
		if log := mx.Log(); strings.Contains(log, bad) {
			t.Errorf("%s: the MTA's log says %q:\n%s", s.host(), bad, log)
		}
	}
	if s.mta == mtatest.KindPostfix {
		// Its disconnect lines count each session's commands: a kept
		// session shows its RSETs (smtpd.c: "rset=N").
		if !regexp.MustCompile(`disconnect from .* rset=[1-9]`).MatchString(mx.Log()) {
			t.Errorf("%s: no session with a RSET in the MTA's log:\n%s", s.host(), mx.Log())
		}
	}
}
