// Command mailworld serves a simulated mail world on loopback addresses: an
// authoritative DNS server and one SMTP server per mail host, each behaving
// as the world file says. It lets anyone try verifyd (or any verifier)
// without port 25, which most laptops and clouds block.
//
//	mailworld -world world.json                 serve a world file
//	mailworld -gen -domains 10000 -catchall 0.05 -greylist 0.03 -tarpit 0.01 \
//	    -latency 100ms -write-world w.json -write-expected expected.jsonl
//	                                            generate, save and serve
//	mailworld -gen ... -no-serve                generate and save only
//	mailworld -gen ... -rdap 127.0.53.1:8043 -whois 127.0.53.1:4343
//	                                            also serve registration dates
//	mailworld -gen ... -stats 127.0.0.1:8099    also serve the session log's
//	                                            counters per client (JSON)
//
// Point a verifier at it with its DNS upstream set to the -dns address and
// its SMTP port set to the world's port (default 2525). mailworld runs until
// SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mailworld:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		worldFile   = flag.String("world", "", "world file (JSON) to serve")
		gen         = flag.Bool("gen", false, "generate a world instead of reading one")
		writeWorld  = flag.String("write-world", "", "with -gen: save the generated world here")
		writeExpect = flag.String("write-expected", "", "with -gen: save the expected verdicts here (JSON lines)")
		noServe     = flag.Bool("no-serve", false, "generate and save, then exit")
		dnsAddr     = flag.String("dns", world.DefaultDNSAddr, "DNS server address ip:port")
		smtpPort    = flag.Int("smtp-port", 0, "SMTP port of every host (default: the world's, 2525)")
		rdapAddr    = flag.String("rdap", "", "serve the domains' registration dates over RDAP (HTTP) on this loopback ip:port")
		whoisAddr   = flag.String("whois", "", "serve the domains' registration dates over WHOIS on this loopback ip:port")
		statsAddr   = flag.String("stats", "", "serve the session log's counters per client as JSON (GET /stats) over HTTP on this loopback ip:port")
		verbose     = flag.Bool("v", false, "log every session at debug level")
		o           world.GenOptions
	)
	flag.StringVar(&o.Profile, "profile", "", `with -gen: "" for the behaviour fractions below, "realworld" for providers weighted by market share (bench/RESULTS.md, "Real-world mix"), "feedback" for learning from outcomes, "typos" for did-you-mean (typed domains and the addresses meant); the fractions are not used but by ""`)
	flag.IntVar(&o.Domains, "domains", 1000, "with -gen: number of domains")
	flag.Uint64Var(&o.Seed, "seed", 1, "with -gen: random seed")
	flag.IntVar(&o.AddressesPerDomain, "addresses", 10, "with -gen: expected addresses per domain")
	flag.IntVar(&o.MailboxesPerDomain, "mailboxes", 6, "with -gen: existing mailboxes per domain")
	flag.BoolVar(&o.RoleMailbox, "role", true, "with -gen: one existing role mailbox per domain")
	flag.Float64Var(&o.CatchAll, "catchall", 0.05, "with -gen: fraction of catch-all domains")
	flag.Float64Var(&o.Greylist, "greylist", 0.03, "with -gen: fraction of greylisting domains")
	flag.Float64Var(&o.Reject, "reject", 0.01, "with -gen: fraction of domains rejecting the prober (5.7.1)")
	flag.Float64Var(&o.Tarpit, "tarpit", 0.01, "with -gen: fraction of tarpit hosts")
	flag.Float64Var(&o.Refuse, "refuse", 0.01, "with -gen: fraction of hosts refusing connections")
	flag.Float64Var(&o.Busy, "busy", 0.005, "with -gen: fraction of hosts answering 421")
	flag.Float64Var(&o.NullMX, "nullmx", 0.01, "with -gen: fraction of null-MX domains")
	flag.Float64Var(&o.NoMX, "nomx", 0.01, "with -gen: fraction of domains with neither MX nor A")
	flag.Float64Var(&o.ImplicitMX, "implicitmx", 0.01, "with -gen: fraction of domains with only an A record")
	flag.Float64Var(&o.NXDomain, "nxdomain", 0.02, "with -gen: fraction of non-existent domains")
	flag.Float64Var(&o.ServFail, "servfail", 0.005, "with -gen: fraction of domains whose DNS fails")
	flag.Float64Var(&o.MailboxFull, "full", 0.01, "with -gen: fraction of full mailboxes")
	flag.Float64Var(&o.MailboxDisabled, "disabled", 0.01, "with -gen: fraction of disabled mailboxes")
	flag.Float64Var(&o.STARTTLS, "starttls", 0.3, "with -gen: fraction of hosts offering STARTTLS")
	flag.Float64Var(&o.Auth, "auth", 0.3, "with -gen: fraction of domains with authentication records and a registration date")
	flag.Float64Var(&o.DNSBL, "dnsbl", 0.05, "with -gen: fraction of hosts listed on the block list dnsbl.<tld>")
	flag.Float64Var(&o.DNSWL, "dnswl", 0.2, "with -gen: fraction of hosts listed on the allow list dnswl.<tld>")
	latency := flag.Duration("latency", 0, "with -gen: delay before every SMTP reply")
	jitter := flag.Duration("jitter", 0, "with -gen: random extra delay up to this")
	greyDelay := flag.Duration("greylist-delay", 2*time.Second, "with -gen: how long greylisting lasts")
	disposable := flag.String("disposable", "", "with -gen: comma-separated domains to make and expect disposable")
	flag.Parse()

	var w *world.World
	start := time.Now()
	switch {
	case *gen:
		o.Latency = world.Duration(*latency)
		o.Jitter = world.Duration(*jitter)
		o.GreylistDelay = world.Duration(*greyDelay)
		if *disposable != "" {
			o.DisposableDomains = strings.Split(*disposable, ",")
		}
		var exp []world.Expectation
		var err error
		w, exp, err = world.Generate(o)
		if err != nil {
			return err
		}
		if *writeWorld != "" {
			if err := w.Save(*writeWorld); err != nil {
				return err
			}
		}
		if *writeExpect != "" {
			if err := world.WriteExpectations(*writeExpect, exp); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "mailworld: generated %d domains, %d hosts, %d expected addresses in %s\n",
			len(w.Domains), len(w.Hosts), len(exp), time.Since(start).Round(time.Millisecond))
		if *noServe {
			return nil
		}
	case *worldFile != "":
		var err error
		if w, err = world.Load(*worldFile); err != nil {
			return err
		}
	default:
		return fmt.Errorf("give -world FILE or -gen (see -h)")
	}

	opts := world.Options{DNSAddr: *dnsAddr, SMTPPort: *smtpPort, RDAPAddr: *rdapAddr, WHOISAddr: *whoisAddr}
	if *verbose {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	r, err := world.Start(w, opts)
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Fprintf(os.Stderr, "mailworld: serving %d domains: DNS on %s (udp+tcp), %d SMTP hosts on port %d; started in %s\n",
		len(w.Domains), r.DNS.Addr(), len(w.Hosts), r.SMTP.Port(), time.Since(start).Round(time.Millisecond))
	if r.RDAP != nil {
		fmt.Fprintf(os.Stderr, "mailworld: RDAP at %s\n", r.RDAP.URL())
	}
	if r.WHOIS != nil {
		fmt.Fprintf(os.Stderr, "mailworld: WHOIS on %s\n", r.WHOIS.Addr())
	}
	if *statsAddr != "" {
		st, err := world.StartStats(r.Log(), *statsAddr)
		if err != nil {
			return err
		}
		defer st.Close()
		fmt.Fprintf(os.Stderr, "mailworld: session counters at http://%s/stats\n", st.Addr())
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	fmt.Fprintf(os.Stderr, "mailworld: stopping after %d sessions\n", r.Log().Len())
	return nil
}
