package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// TestEgressOwnHeloNames: a verifyd with four egress addresses, each with
// its own PTR (probe1 … probe4.verifyd.test), and no HELO name configured:
// every address passes the self-check with its own PTR name, none is taken
// out of rotation, the admin listing shows the names, and the sessions say
// them.
func TestEgressOwnHeloNames(t *testing.T) {
	w := &world.World{
		Hosts: []*world.Host{{Name: "mx.shop.test", IP: "127.73.0.1"}},
		Domains: []*world.Domain{{Name: "shop.test", MX: []world.MX{{Pref: 10, Host: "mx.shop.test"}},
			Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}}},
	}
	var addrs []string
	for i := range 4 {
		a := fmt.Sprintf("127.0.0.%d", 2+i)
		addrs = append(addrs, `"`+a+`"`)
		w.Hosts = append(w.Hosts, &world.Host{Name: fmt.Sprintf("probe%d.verifyd.test", i+1), IP: a, Mode: world.HostRefuse})
	}
	w.Defaults()
	run, err := world.Start(w, world.Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	in := startIn(t, t.TempDir(), fmt.Sprintf(`
log_format = "json"
[http]
listen = "127.0.0.1:0"
[metrics]
listen = ""
[resolver]
upstreams = [%q]
[smtp]
port = %d
[egress]
addresses = [%s]
max_conns_per_host = 1
self_check_interval = "1h"
[probe]
lists_dir = "/nonexistent"
`, run.DNS.Addr(), run.SMTP.Port(), strings.Join(addrs, ", ")))

	ac := adminClient(t, in)
	var st []egressRow
	waitFor(t, func() bool {
		st = nil
		if err := ac.Do(context.Background(), http.MethodGet, "/v1/egress", nil, &st); err != nil || len(st) != 4 {
			return false
		}
		for _, s := range st {
			if s.HeloSource != "ptr" {
				return false
			}
		}
		return true
	})
	for i, s := range st {
		if want := fmt.Sprintf("probe%d.verifyd.test", i+1); s.HeloName != want || s.Disabled {
			t.Errorf("%s: says %s, disabled %v (%s); want %s in rotation", s.Addr, s.HeloName, s.Disabled, s.DisabledReason, want)
		}
	}
	c := &client{t: t, base: in.base, key: in.key}
	for range 4 {
		if r := c.do("POST", "/v1/validate", c.key, `{"email":"ann@shop.test"}`); r.status != 200 || r.json(t)["status"] != "valid" {
			t.Fatalf("validate: %d %s", r.status, r.body)
		}
	}
	run.Log().Wait(4, 10*time.Second)
	for _, s := range run.Log().Sessions() {
		i := int(s.Client[len(s.Client)-1] - '2')
		if want := fmt.Sprintf("probe%d.verifyd.test", i+1); s.Helo != want || s.MailFrom != "verify@"+want {
			t.Errorf("session from %s: EHLO %s, MAIL FROM %s; want %s", s.Client, s.Helo, s.MailFrom, want)
		}
	}
}

// egressRow is the part of an admin /v1/egress row the tests read.
type egressRow struct {
	Addr           string `json:"addr"`
	HeloName       string `json:"helo_name"`
	HeloSource     string `json:"helo_source"`
	Disabled       bool   `json:"disabled"`
	DisabledReason string `json:"disabled_reason"`
}
