package world

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// deliveryWorld has a domain for every state and host type Deliver tells
// apart.
func deliveryWorld(t testing.TB) *World {
	t.Helper()
	boxes := map[string]MailboxState{
		"ann": MailboxOK, "full": MailboxFull, "quota": MailboxOverQuota, "off": MailboxDisabled,
		"grey": MailboxGreylist, "bad": MailboxBadSyntax, "nmx": MailboxNullMX, "club": MailboxRestricted,
	}
	mx := func(h string) []MX { return []MX{{Pref: 10, Host: h}} }
	w := &World{
		Hosts: []*Host{
			{Name: "mx.plain.test", IP: "127.9.1.1"},
			{Name: "mx.dead.test", IP: "127.9.1.2", Mode: HostRefuse},
			{Name: "mx.pit.test", IP: "127.9.1.3", Mode: HostTarpit},
			{Name: "mx.busy.test", IP: "127.9.1.4", Mode: HostBusy},
			{Name: "mx.fussy.test", IP: "127.9.1.5", Mode: HostBlocked, MailPolicy: MailRequireSPF, BlockedClients: []string{"127.0.0.1"}},
			{Name: "mx.bare.test", IP: "127.9.1.6", Replies: RepliesBare},
			{Name: "gmail-smtp-in.l.google.com", IP: "127.9.1.7", Provider: "google", Replies: RepliesMultiline},
			{Name: "mta5.am0.yahoodns.net", IP: "127.9.1.8", Provider: "yahoo"},
			{Name: "edge-0.mail.protection.outlook.com", IP: "127.9.1.9", Provider: "microsoft365"},
			{Name: "mx0a.pphosted.com", IP: "127.9.1.10", Provider: "proofpoint"},
			{Name: "mx.harvest.test", IP: "127.9.1.11", AcceptFirst: 3},
			{Name: "mx.deferring.test", IP: "127.9.1.12", Mode: HostDeferEHLO, MailPolicy: MailDefer, MaxRcpts: 1, DropAfterRcpts: 1, DropMode: Drop421},
		},
		Domains: []*Domain{
			{Name: "plain.test", MX: mx("mx.plain.test"), Mailboxes: boxes},
			{Name: "catch.test", MX: mx("mx.plain.test"), Policy: PolicyCatchAll, Mailboxes: boxes},
			{Name: "atb.test", MX: mx("mx.plain.test"), Policy: PolicyCatchAll, UnknownUser: UnknownUserBounce, Mailboxes: boxes},
			{Name: "drop.test", MX: mx("mx.plain.test"), Policy: PolicyCatchAll, UnknownUser: UnknownUserDrop, Mailboxes: boxes},
			{Name: "grey.test", MX: mx("mx.plain.test"), Policy: PolicyGreylist, Mailboxes: boxes},
			{Name: "block.test", MX: mx("mx.plain.test"), Policy: PolicyReject, Mailboxes: boxes},
			{Name: "odd.test", MX: mx("mx.plain.test"), UnknownReply: "550 5.7.1 User unknown", Mailboxes: boxes},
			{Name: "gone.test", NXDomain: true},
			{Name: "null.test", MX: []MX{{Pref: 0, Host: "."}}},
			{Name: "nomx.test"},
			{Name: "broken.test", DNSFault: DNSFaultServFail, MX: mx("mx.plain.test")},
			{Name: "dead.test", MX: mx("mx.dead.test"), Mailboxes: boxes},
			{Name: "pit.test", MX: mx("mx.pit.test"), Mailboxes: boxes},
			{Name: "busy.test", MX: mx("mx.busy.test"), Mailboxes: boxes},
			{Name: "fallback.test", MX: []MX{{Pref: 10, Host: "mx.dead.test"}, {Pref: 20, Host: "mx.pit.test"}, {Pref: 30, Host: "mx.plain.test"}}, Mailboxes: boxes},
			{Name: "fussy.test", MX: mx("mx.fussy.test"), Mailboxes: boxes},
			{Name: "deferring.test", MX: mx("mx.deferring.test"), Mailboxes: boxes},
			{Name: "bare.test", MX: mx("mx.bare.test"), Mailboxes: boxes},
			{Name: "gmail.test", MX: mx("gmail-smtp-in.l.google.com"), Mailboxes: boxes},
			{Name: "gcatch.test", MX: mx("gmail-smtp-in.l.google.com"), Policy: PolicyCatchAll, Mailboxes: boxes},
			{Name: "yahoo.test", MX: mx("mta5.am0.yahoodns.net"), Policy: PolicyCatchAll, Mailboxes: boxes},
			{Name: "ydeliver.test", MX: mx("mta5.am0.yahoodns.net"), Policy: PolicyCatchAll, UnknownUser: UnknownUserDeliver, Mailboxes: boxes},
			{Name: "m365.test", MX: mx("edge-0.mail.protection.outlook.com"), Policy: PolicyCatchAll, Mailboxes: boxes},
			{Name: "dbeb.test", MX: mx("edge-0.mail.protection.outlook.com"), UnknownReply: "550 5.4.1 Recipient address rejected: Access denied. AS(201806281)", Mailboxes: boxes},
			{Name: "pp.test", MX: mx("mx0a.pphosted.com"), Policy: PolicyCatchAll, Mailboxes: boxes},
			{Name: "harvest.test", MX: mx("mx.harvest.test"), Mailboxes: boxes},
		},
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	w.Reindex()
	return w
}

// TestDeliver: what a real send produces, for each state and host type.
func TestDeliver(t *testing.T) {
	w := deliveryWorld(t)
	for _, tc := range []struct {
		email, event string
		code         int
		enh, truth   string
		diag         string // contained in the diagnostic
	}{
		// A plain Postfix host: the mailbox's state decides.
		{"ann@plain.test", EventDelivered, 250, "2.0.0", TruthMailbox, "250 2.0.0 Ok: queued as "},
		{"ANN@Plain.Test", EventDelivered, 250, "2.0.0", TruthMailbox, "queued as"},
		{"postmaster@plain.test", EventDelivered, 250, "2.0.0", TruthMailbox, "queued as"},
		{"zed@plain.test", EventHardBounce, 550, "5.1.1", TruthNoMailbox, "550 5.1.1 <zed@plain.test>: Recipient address rejected: User unknown in virtual mailbox table"},
		{"full@plain.test", EventSoftBounce, 552, "5.2.2", TruthFull, "Mailbox full"},
		{"quota@plain.test", EventSoftBounce, 552, "5.2.2", TruthFull, "Quota exceeded"},
		{"off@plain.test", EventHardBounce, 550, "5.2.1", TruthDisabled, "Mailbox disabled"},
		{"grey@plain.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		{"bad@plain.test", EventHardBounce, 553, "5.1.3", TruthBadSyntax, "mailbox name not allowed"},
		{"nmx@plain.test", EventHardBounce, 550, "5.1.10", TruthNoMX, "null MX"},
		{"club@plain.test", EventHardBounce, 550, "5.7.1", TruthRestricted, "Recipient not authorized"},
		{"josé@plain.test", EventHardBounce, 0, "5.6.7", TruthUTF8, "SMTPUTF8 is required"},
		{"nobody", EventHardBounce, 0, "5.1.3", TruthBadSyntax, "bad address syntax"},
		// Catch-alls at RCPT: the unknown-user behaviour decides.
		{"zed@catch.test", EventDelivered, 250, "2.0.0", TruthCatchAll, ""},
		{"ann@catch.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		{"full@catch.test", EventSoftBounce, 552, "5.2.2", TruthFull, ""},
		{"zed@atb.test", EventHardBounce, 550, "5.1.1", TruthAcceptThenBounce, "User unknown in local recipient table"},
		{"x7k2q9zz@atb.test", EventHardBounce, 550, "5.1.1", TruthAcceptThenBounce, ""},
		{"ann@atb.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		{"quota@atb.test", EventSoftBounce, 552, "5.2.2", TruthFull, ""},
		{"off@atb.test", EventHardBounce, 550, "5.2.1", TruthDisabled, ""},
		{"zed@drop.test", EventDelivered, 250, "2.0.0", TruthDropped, ""},
		{"ann@drop.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		// Greylisting: the sender retries.
		{"ann@grey.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		{"zed@grey.test", EventHardBounce, 550, "5.1.1", TruthNoMailbox, ""},
		// Refusals aimed at the prober are not aimed at the platform.
		{"ann@block.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		{"zed@block.test", EventHardBounce, 550, "5.1.1", TruthNoMailbox, ""},
		{"ann@fussy.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		{"zed@fussy.test", EventHardBounce, 550, "5.1.1", TruthNoMailbox, ""},
		{"ann@deferring.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		// The domain's own wording of an unknown local part.
		{"zed@odd.test", EventHardBounce, 550, "5.7.1", TruthNoMailbox, "550 5.7.1 User unknown"},
		// DNS: the sending MTA's own bounces and deferrals.
		{"x@gone.test", EventHardBounce, 0, "5.1.2", TruthNoDomain, "Host or domain name not found"},
		{"x@null.test", EventHardBounce, 0, "5.1.10", TruthNoMX, "does not accept mail (nullMX)"},
		{"x@nomx.test", EventHardBounce, 0, "5.4.4", TruthNoMX, "no data record"},
		{"x@broken.test", EventSoftBounce, 0, "4.4.3", TruthDNSError, "try again"},
		{"x@elsewhere.test", EventSoftBounce, 0, "4.4.3", TruthDNSError, "try again"},
		// Hosts that cannot be reached; the next MX is tried.
		{"ann@dead.test", EventSoftBounce, 0, "4.4.1", TruthUnreachable, "Connection refused"},
		{"ann@pit.test", EventSoftBounce, 0, "4.4.2", TruthUnreachable, "timed out"},
		{"ann@busy.test", EventSoftBounce, 421, "4.7.0", TruthUnreachable, "421 4.7.0"},
		{"ann@fallback.test", EventDelivered, 250, "2.0.0", TruthMailbox, ""},
		{"zed@fallback.test", EventHardBounce, 550, "5.1.1", TruthNoMailbox, ""},
		// A host without enhanced codes: the platform reports x.0.0.
		{"zed@bare.test", EventHardBounce, 550, "5.0.0", TruthNoMailbox, "550 <zed@bare.test>: Recipient address rejected"},
		{"full@bare.test", EventSoftBounce, 552, "5.0.0", TruthFull, "552 <full@bare.test>"},
		// Providers' wordings.
		{"ann@gmail.test", EventDelivered, 250, "2.0.0", TruthMailbox, "- gsmtp"},
		{"zed@gmail.test", EventHardBounce, 550, "5.1.1", TruthNoMailbox, "550-5.1.1 The email account that you tried to reach does not exist."},
		{"full@gmail.test", EventSoftBounce, 452, "4.2.2", TruthFull, "out of storage space"},
		{"quota@gmail.test", EventSoftBounce, 452, "4.2.2", TruthFull, "p=OverQuotaTemp"},
		{"off@gmail.test", EventHardBounce, 550, "5.2.1", TruthDisabled, "p=DisabledUser"},
		{"zed@gcatch.test", EventDelivered, 250, "2.0.0", TruthCatchAll, ""}, // a Workspace catch-all route
		{"zed@yahoo.test", EventHardBounce, 554, "5.0.0", TruthAcceptThenBounce, "554 delivery error: dd This user doesn't have a yahoo.test account (zed@yahoo.test)"},
		{"ann@yahoo.test", EventDelivered, 250, "2.0.0", TruthMailbox, "250 ok dirdel"},
		{"off@yahoo.test", EventHardBounce, 554, "5.0.0", TruthDisabled, "This mailbox is disabled"},
		{"zed@ydeliver.test", EventDelivered, 250, "2.0.0", TruthCatchAll, ""},
		{"zed@m365.test", EventHardBounce, 550, "5.1.10", TruthAcceptThenBounce, "RESOLVER.ADR.RecipientNotFound"},
		{"ann@m365.test", EventDelivered, 250, "2.6.0", TruthMailbox, "Queued mail for delivery"},
		{"zed@dbeb.test", EventHardBounce, 550, "5.4.1", TruthNoMailbox, "Access denied"},
		{"zed@pp.test", EventHardBounce, 550, "5.1.1", TruthAcceptThenBounce, "... User unknown"},
		// An anti-harvesting host tells the truth by the time of the send.
		{"zed@harvest.test", EventHardBounce, 550, "5.1.1", TruthNoMailbox, ""},
	} {
		at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		d := w.Deliver(tc.email, at)
		if d.Email != tc.email || d.Event != tc.event || d.SMTPCode != tc.code || d.Enhanced != tc.enh || d.Truth != tc.truth ||
			!strings.Contains(d.Diagnostic, tc.diag) {
			t.Errorf("Deliver(%q) = %s %d %s %s %q, want %s %d %s %s %q…", tc.email, d.Event, d.SMTPCode, d.Enhanced, d.Truth, d.Diagnostic,
				tc.event, tc.code, tc.enh, tc.truth, tc.diag)
		}
		if d.Diagnostic == "" || strings.ContainsAny(d.Diagnostic, "{}\r\n") {
			t.Errorf("Deliver(%q): diagnostic %q is empty or has a placeholder or line break", tc.email, d.Diagnostic)
		}
		if lag := d.At.Sub(at); lag < 0 || lag > 2*time.Hour {
			t.Errorf("Deliver(%q): at +%v", tc.email, lag)
		}
		if tc.truth == TruthAcceptThenBounce && d.At.Sub(at) < time.Minute {
			t.Errorf("Deliver(%q): a bounce after acceptance at +%v, before the minute", tc.email, d.At.Sub(at))
		}
		// Expect carries the same truth of delivery.
		if e := w.Expect(tc.email); e.Delivery != d.Event || e.DeliveryTruth != d.Truth {
			t.Errorf("Expect(%q) has delivery %s/%s, Deliver %s/%s", tc.email, e.Delivery, e.DeliveryTruth, d.Event, d.Truth)
		}
	}
}

// TestDeliverIsDeterministic: an address gets the same delivery every
// time, its time following the send's; a seed gives the same world of
// deliveries.
func TestDeliverIsDeterministic(t *testing.T) {
	o := GenOptions{Profile: ProfileFeedback, Domains: 60, Seed: 5}
	w1, exp1, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	w2, exp2, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	lags := map[time.Duration]bool{}
	for i, e := range exp1 {
		a, b := w1.Deliver(e.Email, t0), w2.Deliver(exp2[i].Email, t0)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("the same world delivers %+v, then %+v", a, b)
		}
		later := w1.Deliver(e.Email, t0.Add(72*time.Hour))
		if later.At.Sub(a.At) != 72*time.Hour {
			t.Errorf("%s: sent 72h later, happened %v later", e.Email, later.At.Sub(a.At))
		}
		later.At = a.At
		if !reflect.DeepEqual(a, later) {
			t.Errorf("%s: a later send differs: %+v, %+v", e.Email, a, later)
		}
		lags[a.At.Sub(t0)] = true
	}
	if len(lags) < len(exp1)/2 {
		t.Errorf("%d distinct lags for %d addresses: the times are not spread", len(lags), len(exp1))
	}
}

// TestDeliverComplaints: ComplaintRate of the deliveries to a mailbox
// complain, none of the others; Expect says the same.
func TestDeliverComplaints(t *testing.T) {
	w := &World{
		Hosts:   []*Host{{Name: "mx.many.test", IP: "127.9.2.1"}},
		Domains: []*Domain{{Name: "many.test", MX: []MX{{10, "mx.many.test"}}, Policy: PolicyCatchAll, UnknownUser: UnknownUserDrop, Mailboxes: map[string]MailboxState{}}},
	}
	for i := range 4000 {
		w.Domains[0].Mailboxes[fmt.Sprintf("u%d", i)] = MailboxOK
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	count := func(rate float64) (complaints, dropped int) {
		w.ComplaintRate = rate
		for i := range 4000 {
			for _, lp := range []string{fmt.Sprintf("u%d", i), fmt.Sprintf("gone%d", i)} {
				d := w.Deliver(lp+"@many.test", time.Time{})
				if d.Event == EventComplaint {
					complaints++
					if d.Truth != TruthMailbox {
						t.Fatalf("%s: a complaint from %s", d.Email, d.Truth)
					}
				}
				if d.Truth == TruthDropped && d.Event != EventDelivered {
					dropped++
				}
				if e := w.Expect(d.Email); e.Delivery != d.Event {
					t.Fatalf("%s: Expect says %s, Deliver %s", d.Email, e.Delivery, d.Event)
				}
			}
		}
		return complaints, dropped
	}
	if c, _ := count(0); c != 0 {
		t.Errorf("%d complaints at rate 0", c)
	}
	c, dropped := count(0.1)
	if math.Abs(float64(c)/4000-0.1) > 0.02 {
		t.Errorf("%d complaints of 4,000 deliveries at rate 0.1", c)
	}
	if dropped != 0 {
		t.Errorf("%d dropped messages complained about: nobody reads them", dropped)
	}
	w.ComplaintRate = 1.5
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "complaint_rate") {
		t.Errorf("complaint_rate 1.5 accepted: %v", err)
	}
}

// TestUnknownUserValidation: the unknown-user behaviour needs a domain
// that accepts every local part.
func TestUnknownUserValidation(t *testing.T) {
	_, err := Parse([]byte(`{"hosts":[{"name":"mx.a.test","ip":"127.9.3.1"}],"domains":[
		{"name":"a.test","mx":[{"pref":10,"host":"mx.a.test"}],"unknown_user":"bounce"},
		{"name":"b.test","mx":[{"pref":10,"host":"mx.a.test"}],"policy":"catchall","unknown_user":"vanish"},
		{"name":"c.test","mx":[{"pref":10,"host":"mx.a.test"}],"policy":"catchall","unknown_user":"drop","mailboxes":{"ann":"over_quota"}}]}`))
	for _, want := range []string{`a.test: unknown_user "bounce" needs policy "catchall"`, `b.test: unknown unknown_user "vanish"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "c.test") {
		t.Errorf("a valid domain refused: %v", err)
	}
}

// TestExpectNewStates: what verifyd can know at RCPT time of the new
// states is what it knows of the old: an accept-then-bounce or dropping
// domain is a catch-all, a mailbox over quota at delivery a mailbox.
func TestExpectNewStates(t *testing.T) {
	w := deliveryWorld(t)
	for _, tc := range []struct {
		email, status, reason string
		catchAll              bool
		delivery, truth       string
	}{
		{"quota@plain.test", StatusValid, ReasonOK, false, EventSoftBounce, TruthFull},
		{"ann@plain.test", StatusValid, ReasonOK, false, EventDelivered, TruthMailbox},
		{"zed@atb.test", StatusRisky, ReasonCatchAll, true, EventHardBounce, TruthAcceptThenBounce},
		{"ann@atb.test", StatusRisky, ReasonCatchAll, true, EventDelivered, TruthMailbox},
		{"quota@atb.test", StatusRisky, ReasonCatchAll, true, EventSoftBounce, TruthFull},
		{"full@atb.test", StatusRisky, ReasonSMTPRejected, false, EventSoftBounce, TruthFull},
		{"off@atb.test", StatusInvalid, ReasonSMTPRejected, false, EventHardBounce, TruthDisabled},
		{"zed@drop.test", StatusRisky, ReasonCatchAll, true, EventDelivered, TruthDropped},
		{"zed@catch.test", StatusRisky, ReasonCatchAll, true, EventDelivered, TruthCatchAll},
		{"zed@yahoo.test", StatusRisky, ReasonCatchAll, true, EventHardBounce, TruthAcceptThenBounce},
		{"ann@block.test", StatusUnknown, ReasonSMTPRejected, false, EventDelivered, TruthMailbox},
		{"zed@block.test", StatusUnknown, ReasonSMTPRejected, false, EventHardBounce, TruthNoMailbox},
	} {
		e := w.Expect(tc.email)
		if e.Status != tc.status || e.Reason != tc.reason || e.CatchAll != tc.catchAll || e.Delivery != tc.delivery || e.DeliveryTruth != tc.truth {
			t.Errorf("Expect(%q) = %s/%s catch_all=%t, delivery %s/%s; want %s/%s catch_all=%t, delivery %s/%s", tc.email,
				e.Status, e.Reason, e.CatchAll, e.Delivery, e.DeliveryTruth, tc.status, tc.reason, tc.catchAll, tc.delivery, tc.truth)
		}
	}
	// For every local part, an accept-then-bounce or dropping domain is
	// expected as the true catch-all is, on the same host.
	for _, lp := range []string{"ann", "full", "quota", "off", "grey", "bad", "nmx", "club", "zed", "postmaster"} {
		want := w.Expect(lp + "@catch.test")
		for _, dom := range []string{"atb.test", "drop.test"} {
			got := w.Expect(lp + "@" + dom)
			if got.Status != want.Status || got.Reason != want.Reason || got.CatchAll != want.CatchAll {
				t.Errorf("%s@%s expected %s/%s, %s@catch.test %s/%s", lp, dom, got.Status, got.Reason, lp, want.Status, want.Reason)
			}
		}
	}
}

// TestSMTPAcceptThenBounceLikeCatchAll: in a session, the world's SMTP
// server answers RCPT on an accept-then-bounce or dropping domain as on a
// true catch-all — known, unknown and random local parts alike — and
// takes a mailbox over quota as any mailbox: the truth of delivery does
// not leak into SMTP.
func TestSMTPAcceptThenBounceLikeCatchAll(t *testing.T) {
	boxes := func() map[string]MailboxState {
		return map[string]MailboxState{"ann": MailboxOK, "full": MailboxFull, "off": MailboxDisabled, "quota": MailboxOverQuota}
	}
	tw := startWorld(t, []*Host{{Name: "mx.mixed.test"}}, []*Domain{
		{Name: "catch.test", Policy: PolicyCatchAll, Mailboxes: boxes()},
		{Name: "atb.test", Policy: PolicyCatchAll, UnknownUser: UnknownUserBounce, Mailboxes: boxes()},
		{Name: "drop.test", Policy: PolicyCatchAll, UnknownUser: UnknownUserDrop, Mailboxes: boxes()},
		{Name: "plain.test", Mailboxes: boxes()},
	})
	for _, d := range tw.w.Domains {
		d.MX = []MX{{Pref: 10, Host: "mx.mixed.test"}}
	}
	tw.w.Reindex()
	rc := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	rc.expect("MAIL FROM:<probe@verifyd.test>", "250 2.1.0")
	rcpt := func(addr string) string {
		t.Helper()
		return strings.TrimSuffix(rc.cmd("RCPT TO:<"+addr+">"), "\r\n")
	}
	for _, lp := range []string{"ann", "full", "off", "quota", "zed", "x7k2q9zz", "postmaster"} {
		want := rcpt(lp + "@catch.test")
		wantExp := tw.w.Expect(lp + "@catch.test")
		for _, dom := range []string{"atb.test", "drop.test"} {
			if got := rcpt(lp + "@" + dom); got != want {
				t.Errorf("RCPT %s@%s: %q, on the true catch-all %q", lp, dom, got, want)
			}
			if e := tw.w.Expect(lp + "@" + dom); e.Status != wantExp.Status || e.Reason != wantExp.Reason || e.CatchAll != wantExp.CatchAll {
				t.Errorf("Expect(%s@%s) = %s/%s, on the true catch-all %s/%s", lp, dom, e.Status, e.Reason, wantExp.Status, wantExp.Reason)
			}
		}
	}
	if got := rcpt("zed@atb.test"); !strings.HasPrefix(got, "250 ") {
		t.Errorf("RCPT of an unknown local part on an accept-then-bounce domain: %q, want 250", got)
	}
	if got := rcpt("quota@plain.test"); !strings.HasPrefix(got, "250 2.1.5") {
		t.Errorf("RCPT of a mailbox over quota: %q, want 250 2.1.5", got)
	}
	if e := tw.w.Expect("quota@plain.test"); e.Status != StatusValid || e.Reason != ReasonOK {
		t.Errorf("Expect(quota@plain.test) = %s/%s, want valid/ok", e.Status, e.Reason)
	}
	rc.expect("QUIT", "221 2.0.0")
}

// TestFeedbackWorldAgreesWithExpect: over real DNS and SMTP, a world of
// ProfileFeedback answers every address as Expect says (see
// TestWorldAgreesWithExpect), its new behaviours included.
func TestFeedbackWorldAgreesWithExpect(t *testing.T) {
	w, exp, err := Generate(GenOptions{Profile: ProfileFeedback, Domains: 100, Seed: 7, AddressesPerDomain: 4,
		MailboxesPerDomain: 2, RoleMailbox: true, FirstIP: "127.68.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	r, err := Start(w, Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	o := &oracle{dns: r.DNS.Addr(), port: r.SMTP.Port(), clock: clock}
	truths := map[string]bool{}
	for _, e := range exp {
		status, reason := o.judge(e.Email)
		if e.Role && status == StatusValid {
			reason = ReasonRoleBased
		}
		if status != e.Status || reason != e.Reason {
			t.Errorf("%s (%s): the world answers %s/%s, Expect says %s/%s", e.Email, e.Group, status, reason, e.Status, e.Reason)
		}
		truths[e.DeliveryTruth] = true
	}
	for _, want := range []string{TruthMailbox, TruthCatchAll, TruthDropped, TruthAcceptThenBounce, TruthNoMailbox, TruthNoDomain, TruthNoMX} {
		if !truths[want] {
			t.Errorf("no address of the feedback world has delivery truth %s: %v", want, truths)
		}
	}
}

// TestFeedbackProfile: 2,000 addresses by default, with each truth of
// delivery the benchmark of outcomes needs, labelled by behaviour.
func TestFeedbackProfile(t *testing.T) {
	w, exp, err := Generate(GenOptions{Profile: ProfileFeedback, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(exp) != 2000 {
		t.Errorf("%d addresses, want 2,000", len(exp))
	}
	byVerdict := map[string]map[string]int{}
	groups := map[string]int{}
	for _, e := range exp {
		if e.Group == "" || e.Delivery == "" || e.DeliveryTruth == "" {
			t.Fatalf("%s: no group or delivery: %+v", e.Email, e)
		}
		groups[strings.SplitN(e.Group, " · ", 2)[0]]++
		v := e.Status + "/" + e.Reason
		if byVerdict[v] == nil {
			byVerdict[v] = map[string]int{}
		}
		byVerdict[v][e.DeliveryTruth]++
	}
	for _, g := range []string{"plain", "catch-all", "accept-then-bounce", "catch-all dropping unknown", "greylisting", "policy block 5.7.1"} {
		if groups[g] == 0 {
			t.Errorf("no addresses of group %q: %v", g, groups)
		}
	}
	// What the benchmark is for: verifyd's risky/catch_all hides
	// deliveries, bounces after acceptance and drops; valid/ok hides
	// mailboxes that fill up.
	cr := byVerdict[StatusRisky+"/"+ReasonCatchAll]
	for _, truth := range []string{TruthMailbox, TruthCatchAll, TruthAcceptThenBounce, TruthDropped} {
		if cr[truth] == 0 {
			t.Errorf("no risky/catch_all address with truth %s: %v", truth, cr)
		}
	}
	if byVerdict[StatusValid+"/"+ReasonOK][TruthFull] == 0 {
		t.Errorf("no valid/ok address over quota at delivery: %v", byVerdict[StatusValid+"/"+ReasonOK])
	}
	if w.ComplaintRate == 0 {
		t.Error("the feedback world has no complaints")
	}
}

// TestRealWorldDeliveryOptIn: the real-world mix gains accept-then-bounce
// and dropping self-hosted domains only when asked, and they replace
// self-hosted behaviours without changing any other domain.
func TestRealWorldDeliveryOptIn(t *testing.T) {
	base := GenOptions{Profile: ProfileRealWorld, Domains: 1000, Seed: 3}
	w0, exp0, err := Generate(base)
	if err != nil {
		t.Fatal(err)
	}
	opt := base
	opt.AcceptThenBounce, opt.DropUnknown, opt.MailboxOverQuota = 0.2, 0.1, 0.05
	w1, exp1, err := Generate(opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp0) != len(exp1) || len(w0.Hosts) != len(w1.Hosts) {
		t.Fatalf("%d addresses and %d hosts, then %d and %d", len(exp0), len(w0.Hosts), len(exp1), len(w1.Hosts))
	}
	made := map[string]int{}
	for i, a := range exp0 {
		b := exp1[i]
		if a.Email != b.Email {
			t.Fatalf("address %d: %s, then %s", i, a.Email, b.Email)
		}
		g := strings.SplitN(b.Group, " · ", 2)[0]
		if g == "self-hosted accept-then-bounce" || g == "self-hosted catch-all dropping unknown" {
			made[g]++
			if b.Status != StatusRisky || b.Reason != ReasonCatchAll {
				t.Errorf("%s (%s) expected %s/%s, want risky/catch_all", b.Email, b.Group, b.Status, b.Reason)
			}
			continue
		}
		if strings.HasSuffix(b.Group, " · over_quota") {
			made["over_quota"]++
			continue
		}
		if a.Status != b.Status || a.Reason != b.Reason || a.Group != b.Group {
			t.Errorf("%s changed: %s/%s (%s), then %s/%s (%s)", a.Email, a.Status, a.Reason, a.Group, b.Status, b.Reason, b.Group)
		}
	}
	for _, g := range []string{"self-hosted accept-then-bounce", "self-hosted catch-all dropping unknown", "over_quota"} {
		if made[g] == 0 {
			t.Errorf("no addresses of %s: %v", g, made)
		}
	}
	// Yahoo bounces after DATA what it accepted at RCPT, with no option.
	for _, e := range exp0 {
		if strings.HasSuffix(e.Email, "@yahoo.com") && e.Group == "yahoo (yahoo.com) · unknown" && e.DeliveryTruth != TruthAcceptThenBounce {
			t.Errorf("%s: delivery truth %s at Yahoo, want accept_then_bounce", e.Email, e.DeliveryTruth)
		}
	}
}

// TestGenerateDeliveryOptions: the synthetic generator makes exactly the
// asked shares of accept-then-bounce and dropping domains, and refuses
// shares out of range.
func TestGenerateDeliveryOptions(t *testing.T) {
	w, exp, err := Generate(GenOptions{Domains: 100, Seed: 2, CatchAll: 0.1, AcceptThenBounce: 0.1, DropUnknown: 0.05,
		MailboxOverQuota: 0.2, ComplaintRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	count := map[UnknownUser]int{}
	quota, known := 0, 0
	for _, d := range w.Domains {
		if d.Policy == PolicyCatchAll {
			count[d.UnknownUser]++
		}
		for _, st := range d.Mailboxes {
			known++
			if st == MailboxOverQuota {
				quota++
			}
		}
	}
	if count[UnknownUserBounce] != 10 || count[UnknownUserDrop] != 5 || count[UnknownUserDefault] != 10 {
		t.Errorf("catch-alls by unknown-user behaviour: %v, want 10 bounce, 5 drop, 10 default", count)
	}
	if share := float64(quota) / float64(known); math.Abs(share-0.2) > 0.05 {
		t.Errorf("%d of %d known mailboxes over quota, want a fifth", quota, known)
	}
	if w.ComplaintRate != 0.01 {
		t.Errorf("complaint rate %v, want 0.01", w.ComplaintRate)
	}
	for _, e := range exp {
		if e.Group != "" {
			t.Fatalf("%s: group %q in the synthetic profile", e.Email, e.Group)
		}
	}
	_, _, err = Generate(GenOptions{CatchAll: 0.6, AcceptThenBounce: 0.5, DropUnknown: -0.1, MailboxFull: 0.6, MailboxOverQuota: 0.6})
	for _, want := range []string{"add up to", "drop unknown fraction", "mailbox state fractions"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}
