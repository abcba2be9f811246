package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/server/webhook/webhooktest"
)

// TestBatchDeferredSender: a batch meets a server that defers unknown
// senders at EHLO (421 4.7.0 [TSS04], Yahoo's answer) and one that greets
// with 554. Their addresses end unknown, never invalid, and the job's
// webhook receives reputation.warning events naming the egress address.
func TestBatchDeferredSender(t *testing.T) {
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx.tss.test", IP: "127.73.0.1", Mode: world.HostDeferEHLO},
			{Name: "mx.block554.test", IP: "127.73.0.2", Mode: world.HostBlocked},
			{Name: "mx.fine.test", IP: "127.73.0.3"},
		},
		Domains: []*world.Domain{
			{Name: "tss.test", MX: []world.MX{{Pref: 10, Host: "mx.tss.test"}}, Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
			{Name: "block554.test", MX: []world.MX{{Pref: 10, Host: "mx.block554.test"}}, Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
			{Name: "fine.test", MX: []world.MX{{Pref: 10, Host: "mx.fine.test"}}, Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
		},
	}
	run := startWorld(t, w)
	in := startIn(t, t.TempDir(), batchConfig(run, "", ""))
	c := &client{t: t, base: in.base, key: in.key}
	hook := webhooktest.New(t, 200)
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, []string{"ann@tss.test", "bob@tss.test", "ann@block554.test", "ann@fine.test"},
		map[string]any{"webhookUrl": hook.URL}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	waitDone(t, c, c.key, id, 120*time.Second)
	csv := string(c.do("GET", "/v1/jobs/"+id+"/results.csv", c.key, "").body)
	for _, want := range []string{"ann@tss.test,unknown", "bob@tss.test,unknown", "ann@block554.test,unknown", "ann@fine.test,valid"} {
		if !strings.Contains(csv, want) {
			t.Errorf("results lack %q:\n%s", want, csv)
		}
	}
	waitFor(t, func() bool {
		for _, h := range hook.Requests() {
			if h.Header.Get("X-SVC-Event") == "reputation.warning" {
				var ev map[string]any
				return json.Unmarshal(h.Body, &ev) == nil
			}
		}
		return false
	})
}
