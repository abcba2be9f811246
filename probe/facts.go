package probe

import (
	"log/slog"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/verifyd/verifyd/storage"
)

// Facts is what the boxes of a fleet share about domains and MX hosts,
// so that one box does not learn again, at the cost of SMTP sessions,
// what another already knows (docs/fleet.md, "Shared domain knowledge"):
//
//   - "catchall", by domain: whether it accepts any local part ("yes",
//     "no"), found with one RCPT of a random local part;
//   - "provider", by MX host name: the provider its greeting or EHLO reply
//     names when its host name does not (a session's worth).
//
// MX answers are not shared: the resolver's cache on each box answers
// them from a nearby recursive resolver in about the time a database
// query would take. A store answers ok false for a fact it does not have
// or that expired. The engine calls Fact on a miss of its own cache and
// PutFacts in the background, never waiting for it, with the facts
// learnt within factsGather; errors are logged and cost only the
// sharing.
type Facts interface {
	Fact(kind, key string) (value string, expires time.Time, ok bool, err error)
	PutFacts(facts []storage.Fact) error
}

// maxFactsPut bounds the facts of one PutFacts; factsGather is how long
// the writer gathers facts after the first before it writes them (one
// statement and one commit for all of them): another box learns a fact
// that much later, and probes in the meantime as it would have anyway.
const (
	maxFactsPut = 256
	factsGather = 100 * time.Millisecond
)

// Kinds of Facts.
const (
	FactCatchAll = "catchall"
	FactProvider = "provider"
)

// providerFactTTL is how long a provider learnt from a greeting is
// shared.
const providerFactTTL = 7 * 24 * time.Hour

// factMissTTL is how long a box remembers that the fleet knew nothing of
// a domain, before asking the store again.
const factMissTTL = time.Minute

var (
	factHits     = metrics.NewCounter(`verifyd_probe_shared_facts_total{outcome="hit"}`)
	factMisses   = metrics.NewCounter(`verifyd_probe_shared_facts_total{outcome="miss"}`)
	factErrors   = metrics.NewCounter(`verifyd_probe_shared_facts_total{outcome="error"}`)
	factsPut     = metrics.NewCounter(`verifyd_probe_shared_facts_put_total`)
	factsDropped = metrics.NewCounter(`verifyd_probe_shared_facts_dropped_total`)
)

// factWriter writes facts to the store in the background, gathering
// them for factsGather (or up to maxFactsPut) into one write; when it
// falls behind, new facts are dropped (counted).
type factWriter struct {
	store Facts
	log   *slog.Logger
	ch    chan fact
}

type fact struct {
	kind, key, value string
	expires          time.Time
}

func newFactWriter(store Facts, log *slog.Logger) *factWriter {
	w := &factWriter{store: store, log: log, ch: make(chan fact, 1024)}
	go w.loop()
	return w
}

func (w *factWriter) put(f fact) {
	select {
	case w.ch <- f:
	default:
		factsDropped.Inc()
	}
}

func (w *factWriter) loop() {
	fs := make([]storage.Fact, 0, maxFactsPut)
	gather := time.NewTimer(0)
	<-gather.C
	for f := range w.ch {
		fs = append(fs[:0], f.stored())
		gather.Reset(factsGather)
	more:
		for len(fs) < maxFactsPut {
			select {
			case f, ok := <-w.ch:
				if !ok {
					break more
				}
				fs = append(fs, f.stored())
			case <-gather.C:
				break more
			}
		}
		gather.Stop()
		if err := w.store.PutFacts(fs); err != nil {
			factErrors.Inc()
			w.log.Warn("cannot share facts with the fleet", "facts", len(fs), "first", fs[0].Kind+" "+fs[0].Key, "err", err)
			continue
		}
		factsPut.Add(len(fs))
	}
}

func (f fact) stored() storage.Fact {
	return storage.Fact{Kind: f.kind, Key: f.key, Value: f.value, Expires: f.expires}
}

// lookup asks the store; errors count as a miss.
func lookupFact(store Facts, log *slog.Logger, kind, key string) (string, time.Time, bool) {
	v, exp, ok, err := store.Fact(kind, key)
	switch {
	case err != nil:
		factErrors.Inc()
		log.Warn("cannot read a fact shared by the fleet", "kind", kind, "key", key, "err", err)
		return "", time.Time{}, false
	case ok:
		factHits.Inc()
	default:
		factMisses.Inc()
	}
	return v, exp, ok
}

// learntProviders remembers the providers the fleet learnt from greetings,
// by MX host, and the hosts it knew nothing of (for factMissTTL).
type learntProviders struct {
	facts  Facts
	writer *factWriter
	log    *slog.Logger

	mu sync.Mutex
	m  map[string]learnt
}

type learnt struct {
	p   *Provider // nil: the fleet knew none
	exp time.Time
}

// maxLearnt bounds learntProviders; when full it starts again.
const maxLearnt = 100_000

// get returns the provider the fleet learnt for host, or nil.
func (l *learntProviders) get(host string, now time.Time) *Provider {
	l.mu.Lock()
	e, ok := l.m[host]
	l.mu.Unlock()
	if ok && now.Before(e.exp) {
		return e.p
	}
	v, exp, found := lookupFact(l.facts, l.log, FactProvider, host)
	e = learnt{exp: now.Add(factMissTTL)}
	if found && exp.After(now) {
		e = learnt{p: providerIndex.byName(v), exp: exp}
	}
	l.mu.Lock()
	if len(l.m) >= maxLearnt {
		clear(l.m)
	}
	l.m[host] = e
	l.mu.Unlock()
	return e.p
}

// learn shares that host's greeting named p.
func (l *learntProviders) learn(host string, p *Provider, now time.Time) {
	exp := now.Add(providerFactTTL)
	l.mu.Lock()
	l.m[host] = learnt{p: p, exp: exp}
	l.mu.Unlock()
	l.writer.put(fact{kind: FactProvider, key: host, value: p.Name, expires: exp})
}
