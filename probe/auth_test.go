package probe

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/probe/authsig"
)

// authWorld is the world of the auth-signal tests:
//
//   - full.test publishes every signal: SPF through an include, DKIM,
//     DMARC with every tag, MTA-STS, TLS-RPT, BIMI with a VMC, the svc
//     trust record, CAA, a signed zone with TLSA for its MX; its MX offers
//     STARTTLS, has forward-confirmed reverse DNS, is on a block list and
//     on the allow list, accepts postmaster@ and abuse@; the registry
//     knows when it was registered;
//   - bare.test publishes nothing; its MX has no PTR and no STARTTLS,
//     and refuses postmaster@ (against RFC 5321 §4.5.1);
//   - mid.test publishes SPF, DKIM and MTA-STS, but its _dmarc subtree is
//     a zone whose server fails (SERVFAIL), as is one of the block lists
//     in the test that wants it.
func authWorld() *world.World {
	ok := world.MailboxOK
	txt := func(name, v string) world.Record { return world.Record{Name: name, Type: "TXT", Data: `"` + v + `"`} }
	mx := func(h string) []world.MX { return []world.MX{{Pref: 10, Host: h}} }
	const dkim = "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx.full.test", IP: "127.65.0.1", TLS: "1.3"},
			{Name: "mx.bare.test", IP: "127.65.0.2", PTR: "-"},
			{Name: "mx.mid.test", IP: "127.65.0.3"},
		},
		Domains: []*world.Domain{
			{
				Name: "full.test", MX: mx("mx.full.test"), Signed: true, Registered: "2001-02-03",
				Mailboxes: map[string]world.MailboxState{"ann": ok, "bea": ok, "postmaster": ok, "abuse": ok},
				Records: []world.Record{
					txt("@", "v=spf1 mx include:_spf.full.test -all"),
					txt("_spf", "v=spf1 ip4:127.65.0.0/16 ~all"),
					txt("selector1._domainkey", dkim),
					txt("_dmarc", "v=DMARC1; p=reject; sp=quarantine; adkim=s; aspf=s; rua=mailto:dmarc@full.test"),
					txt("_mta-sts", "v=STSv1; id=20260101"),
					txt("_smtp._tls", "v=TLSRPTv1; rua=mailto:tlsrpt@full.test"),
					txt("default._bimi", "v=BIMI1; l=https://full.test/logo.svg; a=https://full.test/vmc.pem"),
					txt("_svc-trust", "v=SVC1; k=key1; l=4"),
					{Name: "@", Type: "CAA", Data: `0 issue "ca.test"`},
					{Name: "_25._tcp.mx", Type: "TLSA", Data: "3 1 1 " + strings.Repeat("ab", 32)},
				},
			},
			{Name: "bare.test", MX: mx("mx.bare.test"), Mailboxes: map[string]world.MailboxState{"bob": ok}, NoPostmaster: true},
			{
				Name: "mid.test", MX: mx("mx.mid.test"), Mailboxes: map[string]world.MailboxState{"cy": ok}, NoPostmaster: true,
				Records: []world.Record{
					txt("@", "v=spf1 mx -all"),
					txt("default._domainkey", dkim),
					txt("_mta-sts", "v=STSv1; id=1"),
					txt("_dmarc", "v=DMARC1; p=reject"), // shadowed by the failing zone below
				},
			},
			{Name: "_dmarc.mid.test", DNSFault: world.DNSFaultServFail},
			{
				// A domain that says it neither receives nor sends mail.
				Name: "nullmx.test", MX: []world.MX{{Pref: 0, Host: "."}},
				Records: []world.Record{txt("@", "v=spf1 -all"), txt("_dmarc", "v=DMARC1; p=reject")},
			},
		},
		DNSBL: []*world.DNSBLZone{
			{Zone: "bl.lists.test", Listed: map[string]string{"127.65.0.1": "127.0.0.2"}},
			{Zone: "bl2.lists.test"},
			{Zone: "wl.lists.test", Listed: map[string]string{"127.65.0.1": "127.0.5.1"}},
		},
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		panic(err)
	}
	return w
}

// authEnv starts authWorld with its registry, and an engine with an auth
// collector on it (the domain-age lookups go to the world's RDAP server and
// may dial loopback addresses only).
// authNow is the domain-age clock of authEnv: a fixed instant, so the age
// the engine reports and the one the test expects are counted from the same
// moment (a real clock could pass midnight between the two).
var authNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func authEnv(t *testing.T) (*env, *Engine, *authsig.DomainAge) {
	t.Helper()
	e := startEnv(t, authWorld(), envOptions{startTLS: true, registry: true})
	quiet := slog.New(slog.DiscardHandler)
	age, err := authsig.NewDomainAge(authsig.AgeOptions{
		Resolver: e.res, RDAP: map[string]string{"test": e.run.RDAP.URL()}, WHOIS: map[string]string{"test": e.run.WHOIS.Addr()},
		Allow: netip.Addr.IsLoopback, Logger: quiet,
		Now: func() time.Time { return authNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(age.Close)
	col, err := authsig.NewCollector(authsig.CollectorOptions{
		Resolver: e.res, TrustKeys: authsig.TrustKeys{"key1": 3},
		DNSBL: []string{"bl.lists.test", "bl2.lists.test"}, DNSWL: []string{"wl.lists.test"},
		Age: age, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(col.Close)
	eng, err := New(Options{
		Resolver: e.res, Egress: e.pool, SMTPPort: e.run.SMTP.Port(), HeloName: "prober.verifyd.test",
		CommandTimeout: 5 * time.Second, SessionTimeout: 10 * time.Second, StartTLS: true, Auth: col, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, eng, age
}

func verify(t *testing.T, eng *Engine, email string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return eng.Verify(ctx, email)
}

func jsonObject(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkKeys compares the auth object with want, key by key, and checks
// that the keys want leaves out are the omitted ones.
func checkKeys(t *testing.T, got, want map[string]any, omitted []string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("%s missing, want %v", k, want[k])
		} else if !reflect.DeepEqual(g, want[k]) {
			t.Errorf("%s = %v, want %v", k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s = %v, want it omitted", k, got[k])
		}
	}
	if len(want)+len(omitted) != authsig.Keys {
		t.Errorf("the test names %d keys, the auth object has %d", len(want)+len(omitted), authsig.Keys)
	}
	for _, k := range omitted {
		if _, ok := want[k]; ok {
			t.Errorf("%s both wanted and omitted", k)
		}
	}
}

func rcptCount(sessions []world.Session, addr string) int {
	n := 0
	for _, s := range sessions {
		for _, r := range s.Rcpts {
			if strings.EqualFold(r.Addr, addr) {
				n++
			}
		}
	}
	return n
}

// TestAuthEveryKey probes a domain that publishes every signal: the
// receipt's auth object has all 29 keys with the expected values, the
// flat copies match, the positive signals reach the score's evidence, and
// the role mailboxes are probed once per domain.
func TestAuthEveryKey(t *testing.T) {
	e, eng, age := authEnv(t)
	first := verify(t, eng, "ann@full.test")
	if first.Status != StatusValid || first.Auth == nil {
		t.Fatalf("first probe: %s/%s auth %v", first.Status, first.Reason, first.Auth)
	}
	// The registration date is looked up in the background; the first
	// probe has it only if the lookup won the race.
	registered := time.Date(2001, 2, 3, 0, 0, 0, 0, time.UTC)
	if d := *first.Auth.DomainAgeDays; d != 0 && d != int(authNow.Sub(registered)/(24*time.Hour)) {
		t.Errorf("first probe: domain_age_days %d", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, ok := age.Days("full.test"); !ok && time.Now().Before(deadline); _, ok = age.Days("full.test") {
		time.Sleep(5 * time.Millisecond)
	}

	r := verify(t, eng, "bea@full.test")
	if r.Status != StatusValid {
		t.Fatalf("second probe: %s/%s", r.Status, r.Reason)
	}
	// The second probe may have taken the session the first kept open
	// (reuse.go): one session or two, every one with TLS; the last
	// carried bea's RCPT.
	eng.Wait()
	// The world logs a session once its connection is closed, a moment
	// after the engine's QUIT returned.
	sessions := e.run.Log().Sessions()
	for deadline := time.Now().Add(5 * time.Second); rcptCount(sessions, "bea@full.test") == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		sessions = e.run.Log().Sessions()
	}
	if len(sessions) == 0 {
		t.Fatal("no session logged")
	}
	last := sessions[len(sessions)-1]
	if len(sessions) > 2 || !sessions[0].TLS || !last.TLS || rcptCount([]world.Session{last}, "bea@full.test") != 1 {
		t.Fatalf("%d sessions (TLS %v, %v), want one or two with TLS, the last asking bea", len(sessions), sessions[0].TLS, last.TLS)
	}
	days := float64(int(authNow.Sub(registered) / (24 * time.Hour)))
	want := map[string]any{
		"spf": "strict", "dkim": "found", "dmarc": "found", "dmarc_policy": "reject",
		"dmarc_subdomain_policy": "quarantine", "dmarc_alignment_spf": "s", "dmarc_alignment_dkim": "s",
		"dmarc_rua_set": true, "svc_certified": true, "svc_trust_level": 3.0, "svc_key_id": "key1",
		"mta_sts": true, "tls_rpt": true, "dane": true, "dnssec": true, "bimi": true, "bimi_vmc": true,
		"caa": true, "fcrdns": true, "ptr": "mx.full.test", "tls_version": "TLS 1.3",
		"tls_cipher": tls.CipherSuiteName(last.TLSCipher), "abuse_mailbox": true, "postmaster_mailbox": true,
		"helo_matches_rdns": true, "dnsbl_clean": false, "dnsbl_lists_on": []any{"bl.lists.test"},
		"dnswl_listed": true, "domain_age_days": days,
	}
	got := jsonObject(t, r.Auth)
	checkKeys(t, got, want, nil)
	if !strings.HasPrefix(want["tls_cipher"].(string), "TLS_") {
		t.Errorf("cipher %v", want["tls_cipher"])
	}
	if flat := jsonObject(t, r.AuthFlat()); !reflect.DeepEqual(flat, map[string]any{
		"spf": "strict", "dkim": "found", "dmarc": "found", "mta_sts": true, "svc_certified": true,
	}) {
		t.Errorf("flat copies %v", flat)
	}
	if r.Evidence.Auth != 4 {
		t.Errorf("evidence counts %d positive signals, want 4", r.Evidence.Auth)
	}
	ev := r.Evidence
	ev.Auth = 0
	if _, _, base := Decide(ev); r.Score != base+8 {
		t.Errorf("score %d, want %d + 8 for four positive signals", r.Score, base)
	}
	for _, addr := range []string{"postmaster@full.test", "abuse@full.test"} {
		if n := rcptCount(sessions, addr); n != 1 {
			t.Errorf("RCPT TO:<%s> sent %d times in two probes, want once", addr, n)
		}
	}
	// The role probes come after the real RCPT and the catch-all probe.
	if rc := sessions[0].Rcpts; len(rc) < 4 || rc[0].Addr != "ann@full.test" || !strings.HasPrefix(rc[1].Addr, "verifyd-") {
		t.Errorf("first session's RCPTs: %+v", rc)
	}
}

// TestAuthBareDomain probes a domain that publishes nothing: every lookup
// answered, so the "none" postures are present as none or false, and the
// keys no lookup can give are left out.
func TestAuthBareDomain(t *testing.T) {
	_, eng, _ := authEnv(t)
	r := verify(t, eng, "bob@bare.test")
	if r.Status != StatusValid || r.Auth == nil {
		t.Fatalf("%s/%s auth %v", r.Status, r.Reason, r.Auth)
	}
	checkKeys(t, jsonObject(t, r.Auth), map[string]any{
		"spf": "none", "dkim": "none", "dmarc": "none", "svc_certified": false, "svc_trust_level": 0.0,
		"mta_sts": false, "tls_rpt": false, "dane": false, "dnssec": false, "bimi": false, "bimi_vmc": false,
		"caa": false, "fcrdns": false, "abuse_mailbox": false, "postmaster_mailbox": false,
		"helo_matches_rdns": false, "dnsbl_clean": true, "dnsbl_lists_on": []any{}, "dnswl_listed": false,
		"domain_age_days": 0.0,
	}, []string{
		"dmarc_policy", "dmarc_subdomain_policy", "dmarc_alignment_spf", "dmarc_alignment_dkim", "dmarc_rua_set",
		"svc_key_id", "ptr", "tls_version", "tls_cipher",
	})
	if r.Evidence.Auth != 0 {
		t.Errorf("evidence counts %d positive signals", r.Evidence.Auth)
	}
}

// TestAuthNullMX: a null-MX domain (RFC 7505) is invalid/no_mx_record
// without an SMTP session, and still reports its DNS-based posture (SPF
// -all, DMARC p=reject are how it says it sends no mail); the keys only an
// SMTP session or an MX host can give are absent. Batch does the same.
func TestAuthNullMX(t *testing.T) {
	e, eng, _ := authEnv(t)
	r := verify(t, eng, "ann@nullmx.test")
	if r.Status != StatusInvalid || r.Reason != ReasonNoMX || r.Auth == nil {
		t.Fatalf("%s/%s auth %v", r.Status, r.Reason, r.Auth)
	}
	want := map[string]any{
		"spf": "strict", "dkim": "none", "dmarc": "found", "dmarc_policy": "reject", "dmarc_subdomain_policy": "reject",
		"dmarc_alignment_spf": "r", "dmarc_alignment_dkim": "r", "dmarc_rua_set": false,
		"svc_certified": false, "svc_trust_level": 0.0, "mta_sts": false, "tls_rpt": false, "dnssec": false,
		"bimi": false, "bimi_vmc": false, "caa": false, "domain_age_days": 0.0,
	}
	smtpOnly := []string{"svc_key_id", "dane", "fcrdns", "ptr", "tls_version", "tls_cipher", "abuse_mailbox", "postmaster_mailbox",
		"helo_matches_rdns", "dnsbl_clean", "dnsbl_lists_on", "dnswl_listed"}
	checkKeys(t, jsonObject(t, r.Auth), want, smtpOnly)
	if n := len(e.run.Log().Sessions()); n != 0 {
		t.Errorf("%d SMTP sessions for a null-MX domain", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := eng.VerifyDomain(ctx, []string{"bea@nullmx.test", "cy@nullmx.test"}, netip.Addr{})
	for _, r := range rs {
		if r.Status != StatusInvalid || r.Auth == nil {
			t.Fatalf("batch %s: %s auth %v", r.Email, r.Status, r.Auth)
		}
		checkKeys(t, jsonObject(t, r.Auth), want, smtpOnly)
	}
}

// TestAuthDNSFailureMidway probes a domain whose DMARC lookup and one
// block list fail: the verdict is unaffected, the receipt carries the keys
// that could be learnt, and the others are left out, not invented.
func TestAuthDNSFailureMidway(t *testing.T) {
	e, eng, _ := authEnv(t)
	e.run.DNS.SetFault("bl2.lists.test", world.DNSFaultServFail)
	r := verify(t, eng, "cy@mid.test")
	if r.Status != StatusValid || r.Reason != ReasonOK || r.Auth == nil {
		t.Fatalf("%s/%s auth %v", r.Status, r.Reason, r.Auth)
	}
	checkKeys(t, jsonObject(t, r.Auth), map[string]any{
		"spf": "strict", "dkim": "found", "svc_certified": false, "svc_trust_level": 0.0,
		"mta_sts": true, "tls_rpt": false, "dane": false, "dnssec": false, "bimi": false, "bimi_vmc": false,
		"caa": false, "ptr": "mx.mid.test", "fcrdns": true, "helo_matches_rdns": true,
		"abuse_mailbox": false, "postmaster_mailbox": false, "dnswl_listed": false, "domain_age_days": 0.0,
	}, []string{
		"dmarc", "dmarc_policy", "dmarc_subdomain_policy", "dmarc_alignment_spf", "dmarc_alignment_dkim",
		"dmarc_rua_set", "svc_key_id", "tls_version", "tls_cipher", "dnsbl_clean", "dnsbl_lists_on",
	})
	if r.Evidence.Auth != 3 {
		t.Errorf("evidence counts %d positive signals, want 3 (spf, dkim, mta-sts)", r.Evidence.Auth)
	}
}

// TestAuthBatch checks VerifyDomain: every result of the domain gets the
// signals, from one collection and one session.
func TestAuthBatch(t *testing.T) {
	e, eng, _ := authEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := eng.VerifyDomain(ctx, []string{"ann@full.test", "bea@full.test", "nobody@full.test", "bob@bare.test"}, netip.Addr{})
	for _, r := range rs {
		if r.Auth == nil || r.Auth.SPF == "" || r.Auth.PostmasterMailbox == nil {
			t.Fatalf("%s: auth %+v", r.Email, r.Auth)
		}
	}
	if rs[0].Auth.SPF != "strict" || rs[2].Auth.DANE == nil || !*rs[2].Auth.DANE || rs[3].Auth.SPF != "none" {
		t.Errorf("signals: %+v / %+v", rs[0].Auth, rs[3].Auth)
	}
	if rs[2].Status != StatusInvalid || rs[2].Auth.SPF != "strict" {
		t.Errorf("an invalid address of the domain: %s, spf %q", rs[2].Status, rs[2].Auth.SPF)
	}
	e.run.Log().Wait(2, 5*time.Second)
	if n := rcptCount(e.run.Log().Sessions(), "postmaster@full.test"); n != 1 {
		t.Errorf("postmaster@ probed %d times", n)
	}
	// Each result has its own copy.
	*rs[0].Auth.DANE = false
	if !*rs[1].Auth.DANE {
		t.Error("results share their signals")
	}
}

// TestAuthOff checks that without Options.Auth nothing changes: no auth
// object, no extra RCPT.
func TestAuthOff(t *testing.T) {
	e := startEnv(t, authWorld(), envOptions{startTLS: true})
	r := verify(t, e.engine, "ann@full.test")
	if r.Status != StatusValid || r.Auth != nil || r.Evidence.Auth != 0 {
		t.Fatalf("%s/%s auth %v evidence %d", r.Status, r.Reason, r.Auth, r.Evidence.Auth)
	}
	if flat := jsonObject(t, r.AuthFlat()); len(flat) != 0 {
		t.Errorf("flat copies without auth: %v", flat)
	}
	e.run.Log().Wait(1, 5*time.Second)
	for _, addr := range []string{"postmaster@full.test", "abuse@full.test"} {
		if n := rcptCount(e.run.Log().Sessions(), addr); n != 0 {
			t.Errorf("RCPT TO:<%s> sent without auth signals", addr)
		}
	}
}
