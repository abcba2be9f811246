package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/probe/smtpclient"
)

func TestProviderByMX(t *testing.T) {
	for host, want := range map[string]string{
		"aspmx.l.google.com":                        "google",
		"ALT1.ASPMX.L.GOOGLE.COM.":                  "google",
		"smtp.google.com":                           "google",
		"aspmx2.googlemail.com":                     "google",
		"contoso-com.mail.protection.outlook.com":   "microsoft365",
		"contoso-com.mail.protection.outlook.com.":  "microsoft365",
		"contoso-com.o-v1.mx.microsoft":             "microsoft365",
		"hotmail-com.olc.protection.outlook.com":    "outlook",
		"eur.olc.protection.outlook.com":            "outlook",
		"mta5.am0.yahoodns.net":                     "yahoo",
		"mx-aol.mail.gm0.yahoodns.net":              "yahoo",
		"mx01.mail.icloud.com":                      "icloud",
		"mx0a-00123401.pphosted.com":                "proofpoint",
		"mx1-us1.ppe-hosted.com":                    "proofpoint",
		"eu-smtp-inbound-1.mimecast.com":            "mimecast",
		"d123456a.ess.barracudanetworks.com":        "barracuda",
		"mx1.hc1234-56.iphmx.com":                   "cisco",
		"mx.spamexperts.antispamcloud.com":          "spamexperts",
		"mx.zoho.eu":                                "zoho",
		"in1-smtp.messagingengine.com":              "fastmail",
		"mail.protonmail.ch":                        "proton",
		"mx.yandex.net":                             "yandex",
		"mxs.mail.ru":                               "mailru",
		"mx00.gmx.net":                              "gmx",
		"mx-ha03.web.de":                            "gmx",
		"google.com":                                "google",
		"evilgoogle.com":                            "",
		"google.com.attacker.test":                  "",
		"mail.protection.outlook.com.attacker.test": "",
		"mx.example.test":                           "",
		"":                                          "",
		"com":                                       "",
	} {
		p := providerIndex.byMX(host)
		got := ""
		if p != nil {
			got = p.Name
		}
		if got != want {
			t.Errorf("byMX(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestProviderByBanner(t *testing.T) {
	for _, c := range []struct{ greeting, bannerHost, ehloHost, want string }{
		{"mx.google.com ESMTP a1b2 - gsmtp", "mx.google.com", "mx.google.com", "google"},
		// A name of no provider, the provider's word in the greeting.
		{"mx.corp.test ESMTP ready - gsmtp", "mx.corp.test", "mx.corp.test", "google"},
		{"BN8NAM11FT066.mail.protection.outlook.com Microsoft ESMTP MAIL Service ready", "BN8NAM11FT066.mail.protection.outlook.com", "", "microsoft365"},
		{"mx.corp.test ESMTP", "mx.corp.test", "mta4294.mail.gq1.yahoo.com", "yahoo"},
		{"gmx.net (mxgmx117) Nemesis ESMTP Service ready", "gmx.net", "", "gmx"},
		{"mx.corp.test ESMTP Postfix", "mx.corp.test", "mx.corp.test", ""},
		// On-premises Exchange says the same words as Exchange Online:
		// the words alone do not make it Microsoft 365.
		{"mail.corp.test Microsoft ESMTP MAIL Service ready", "mail.corp.test", "mail.corp.test", ""},
		{"", "", "", ""},
	} {
		p := providerIndex.byBanner(c.greeting, c.bannerHost, c.ehloHost)
		got := ""
		if p != nil {
			got = p.Name
		}
		if got != c.want {
			t.Errorf("byBanner(%q, %q, %q) = %q, want %q", c.greeting, c.bannerHost, c.ehloHost, got, c.want)
		}
	}
}

func TestProviderClassify(t *testing.T) {
	yahoo := providerIndex.byMX("mta5.am0.yahoodns.net")
	ms := providerIndex.byMX("x.mail.protection.outlook.com")
	reply := func(line string) smtpclient.Reply {
		r, err := smtpclient.ParseReply([]byte(line + "\r\n"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		p    *Provider
		line string
		want smtpclient.Class
		weak bool
	}{
		{yahoo, "552 1 Requested mail action aborted, mailbox not found", smtpclient.NoMailbox, false},
		{nil, "552 1 Requested mail action aborted, mailbox not found", smtpclient.Full, true},
		{yahoo, "552 5.2.2 over quota", smtpclient.Full, false},
		{ms, "550 5.4.1 Recipient address rejected: Access denied", smtpclient.NoMailbox, false},
		{nil, "550 5.4.1 Recipient address rejected: Access denied", smtpclient.NoMailbox, true},
		{ms, "550 5.1.10 RESOLVER.ADR.RecipientNotFound", smtpclient.NoMailbox, false},
		{nil, "550 5.1.10 RESOLVER.ADR.RecipientNotFound", smtpclient.BadDomain, false},
		{ms, "550 5.7.606 Access denied, banned sending IP", smtpclient.Policy, false},
	} {
		r := reply(c.line)
		got, _ := c.p.classify(r, smtpclient.ClassifyRcpt(r, 0))
		if got.Class != c.want || got.Weak != c.weak {
			t.Errorf("%s on %q: %v weak %v, want %v weak %v", c.p.name(), c.line, got.Class, got.Weak, c.want, c.weak)
		}
	}
}

// TestProvidersAgreeWithWorld: the world's notion of each provider, which
// the benchmarks score by, is the engine's.
func TestProvidersAgreeWithWorld(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range providers {
		seen[p.Name] = true
		f, ok := world.Providers[p.Name]
		if !ok {
			t.Errorf("%s: not in world.Providers", p.Name)
			continue
		}
		if f.AcceptsAll != (p.Recipients == AcceptsAll) || f.Gateway != (p.Recipients == Gateway) {
			t.Errorf("%s: world accepts-all %v gateway %v, engine %s", p.Name, f.AcceptsAll, f.Gateway, p.Recipients)
		}
		var rules []string
		var words []world.Wording
		for _, r := range p.Replies {
			if r.Text != "" {
				st, reason, _ := Decide(Evidence{SyntaxOK: true, SMTP: rcptOutcome(smtpclient.Classification{Class: r.Class})})
				words = append(words, world.Wording{Code: r.Code, Text: r.Text, Status: string(st), Reason: string(reason)})
				continue
			}
			if r.Class != smtpclient.NoMailbox {
				t.Errorf("%s: a code rule to %v: the world knows only no-mailbox ones", p.Name, r.Class)
			}
			k := strings.TrimSpace(strings.Join([]string{itoa3(r.Code), r.Enhanced.String()}, " "))
			rules = append(rules, k)
		}
		if !slices.Equal(rules, f.NoMailbox) {
			t.Errorf("%s: engine's no-mailbox replies %q, world's %q", p.Name, rules, f.NoMailbox)
		}
		if !slices.Equal(words, f.Wordings) {
			t.Errorf("%s: engine's wordings %+v, world's %+v", p.Name, words, f.Wordings)
		}
	}
	for name := range world.Providers {
		if !seen[name] {
			t.Errorf("world provider %s is not in the engine's table", name)
		}
	}
}

func itoa3(n int) string {
	return string([]byte{byte('0' + n/100), byte('0' + n/10%10), byte('0' + n%10)})
}

// TestProviderTableDocumented: probe/README.md lists every provider, each
// MX suffix, and the way it answers RCPT.
func TestProviderTableDocumented(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Providers")
	if i < 0 {
		t.Fatal(`README.md has no "## Providers" section`)
	}
	doc = doc[i:]
	if j := strings.Index(doc[3:], "\n## "); j >= 0 {
		doc = doc[:j+3]
	}
	for _, p := range providers {
		var row string
		for _, l := range strings.Split(doc, "\n") {
			if strings.HasPrefix(l, "| `"+p.Name+"`") {
				row = l
			}
		}
		if row == "" {
			t.Errorf("%s: no row in the README's table", p.Name)
			continue
		}
		for _, s := range append(append([]string{}, p.MX...), p.Banner...) {
			if !strings.Contains(row, "`"+s+"`") {
				t.Errorf("%s: %q not in its row", p.Name, s)
			}
		}
		if !strings.Contains(row, p.Recipients.String()) {
			t.Errorf("%s: %s not in its row", p.Name, p.Recipients)
		}
		for _, r := range p.Replies {
			k := strings.TrimSpace(itoa3(r.Code) + " " + r.Enhanced.String())
			if !strings.Contains(row, k) {
				t.Errorf("%s: reply %q not in its row", p.Name, k)
			}
		}
	}
}

// TestProviderLabelled: each probe's provider is counted in the metric and
// written in the probe's log line.
func TestProviderLabelled(t *testing.T) {
	h := &world.Host{Name: "alt1.aspmx.l.google.com", IP: "127.81.4.1", Provider: "google", Replies: world.RepliesMultiline}
	w := &world.World{Hosts: []*world.Host{h},
		Domains: []*world.Domain{{Name: "labelled.test", MX: mx(h.Name), Mailboxes: ok("ann")}}}
	w.Defaults()
	e := startEnv(t, w, envOptions{})
	var buf syncBuffer
	eng := e.engineWith(t, e.res, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	c := providerCounters["google"][StatusInvalid]
	before := c.Get()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := eng.Verify(ctx, "zed@labelled.test")
	if r.Status != StatusInvalid || r.Session.Provider != "google" {
		t.Fatalf("%s/%s provider %q, want invalid from google", r.Status, r.Reason, r.Session.Provider)
	}
	if got := c.Get() - before; got != 1 {
		t.Errorf(`verifyd_probe_provider_results_total{provider="google",status="invalid"} grew by %d, want 1`, got)
	}
	var line map[string]any
	for _, l := range bytes.Split(buf.Bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil && m["msg"] == "probe" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no probe line in the debug log:\n%s", buf.Bytes())
	}
	for k, want := range map[string]any{"email": "zed@labelled.test", "provider": "google", "status": "invalid",
		"reason": "mailbox_not_found", "mx": "alt1.aspmx.l.google.com", "mx_ip": "127.81.4.1"} {
		if line[k] != want {
			t.Errorf("probe line %s = %v, want %v", k, line[k], want)
		}
	}
	// A result decided before SMTP has provider "none".
	r = eng.Verify(ctx, "not an address")
	if r.Session.Provider != "" {
		t.Errorf("no session, provider %q", r.Session.Provider)
	}
}

// syncBuffer is a bytes.Buffer a logger may write from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
