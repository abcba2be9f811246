package probe

import "testing"

func TestDecideTable(t *testing.T) {
	ok := Evidence{SyntaxOK: true, DNS: DNSRouted, SMTP: SMTPAccepted, CatchAll: CatchAllNo}
	with := func(f func(*Evidence)) Evidence { e := ok; f(&e); return e }
	for _, tc := range []struct {
		name   string
		ev     Evidence
		status Status
		reason Reason
		score  int
	}{
		{"syntax", Evidence{}, StatusInvalid, ReasonSyntax, 0},
		{"spamtrap beats valid", with(func(e *Evidence) { e.Spamtrap = true }), StatusSpamtrap, ReasonNone, 0},
		{"disposable beats valid", with(func(e *Evidence) { e.Disposable = true }), StatusDisposable, ReasonDisposable, 0},
		{"spamtrap beats disposable", with(func(e *Evidence) { e.Disposable, e.Spamtrap = true, true }), StatusSpamtrap, ReasonNone, 0},
		{"nxdomain", with(func(e *Evidence) { e.DNS = DNSNXDomain }), StatusInvalid, ReasonDomainNotFound, 0},
		{"no mx", with(func(e *Evidence) { e.DNS = DNSNoMX }), StatusInvalid, ReasonNoMX, 0},
		{"dns timeout is unknown, never invalid", with(func(e *Evidence) { e.DNS = DNSTimeout }), StatusUnknown, ReasonTimeout, 30},
		{"dns failure", with(func(e *Evidence) { e.DNS = DNSFailure }), StatusUnknown, ReasonConnection, 30},
		{"valid", ok, StatusValid, ReasonOK, 90},
		{"valid with auth", with(func(e *Evidence) { e.Auth = 3 }), StatusValid, ReasonOK, 96},
		{"auth capped", with(func(e *Evidence) { e.Auth = 9 }), StatusValid, ReasonOK, 98},
		{"valid, catch-all unknown", with(func(e *Evidence) { e.CatchAll = CatchAllUnknown }), StatusValid, ReasonOK, 80},
		{"role keeps valid", with(func(e *Evidence) { e.Role = true }), StatusValid, ReasonRoleBased, 75},
		{"free provider changes nothing", with(func(e *Evidence) { e.Free = true }), StatusValid, ReasonOK, 90},
		{"catch-all", with(func(e *Evidence) { e.CatchAll = CatchAllYes }), StatusRisky, ReasonCatchAll, 55},
		{"catch-all role", with(func(e *Evidence) { e.CatchAll, e.Role = CatchAllYes, true }), StatusRisky, ReasonCatchAll, 50},
		{"no mailbox", with(func(e *Evidence) { e.SMTP = SMTPNoMailbox }), StatusInvalid, ReasonMailboxNotFound, 2},
		{"bare 550", with(func(e *Evidence) { e.SMTP = SMTPNoMailboxWeak }), StatusInvalid, ReasonMailboxNotFound, 10},
		{"role no mailbox", with(func(e *Evidence) { e.SMTP, e.Role = SMTPNoMailbox, true }), StatusInvalid, ReasonMailboxNotFound, 2},
		{"disabled", with(func(e *Evidence) { e.SMTP = SMTPDisabled }), StatusInvalid, ReasonSMTPRejected, 5},
		{"bad domain", with(func(e *Evidence) { e.SMTP = SMTPBadDomain }), StatusInvalid, ReasonSMTPRejected, 5},
		{"full", with(func(e *Evidence) { e.SMTP = SMTPFull }), StatusRisky, ReasonSMTPRejected, 40},
		{"policy is unknown, never invalid", with(func(e *Evidence) { e.SMTP = SMTPPolicy }), StatusUnknown, ReasonSMTPRejected, 30},
		{"greylisted is unknown, never invalid", with(func(e *Evidence) { e.SMTP = SMTPGreylisted }), StatusUnknown, ReasonTimeout, 30},
		{"timeout", with(func(e *Evidence) { e.SMTP = SMTPTimeout }), StatusUnknown, ReasonTimeout, 30},
		{"busy", with(func(e *Evidence) { e.SMTP = SMTPBusy }), StatusUnknown, ReasonConnection, 30},
		{"refused", with(func(e *Evidence) { e.SMTP = SMTPConnRefused }), StatusUnknown, ReasonConnection, 25},
		{"protocol", with(func(e *Evidence) { e.SMTP = SMTPProtocol }), StatusUnknown, ReasonConnection, 25},
		{"other 5xx", with(func(e *Evidence) { e.SMTP = SMTPRejected }), StatusUnknown, ReasonSMTPRejected, 25},
	} {
		s, r, sc := Decide(tc.ev)
		if s != tc.status || r != tc.reason || sc != tc.score {
			t.Errorf("%s: Decide = %s/%s/%d, want %s/%s/%d", tc.name, s, r, sc, tc.status, tc.reason, tc.score)
		}
	}
}

// allEvidence enumerates every combination of the evidence fields.
func allEvidence(f func(Evidence)) {
	for _, syn := range []bool{false, true} {
		for _, trap := range []bool{false, true} {
			for _, disp := range []bool{false, true} {
				for _, role := range []bool{false, true} {
					for dns := DNSRouted; dns <= DNSFailure; dns++ {
						for smtp := SMTPNotTried; smtp <= SMTPProtocol; smtp++ {
							for ca := CatchAllUnknown; ca <= CatchAllYes; ca++ {
								for auth := 0; auth <= 5; auth++ {
									f(Evidence{SyntaxOK: syn, Spamtrap: trap, Disposable: disp, Role: role, DNS: dns, SMTP: smtp, CatchAll: ca, Auth: auth})
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestScoreBands checks that the verdict bands never overlap, so a score
// orders addresses the same way the verdicts do.
func TestScoreBands(t *testing.T) {
	band := map[Status][2]int{
		StatusValid: {65, 98}, StatusRisky: {35, 63}, StatusUnknown: {20, 30},
		StatusInvalid: {0, 10}, StatusDisposable: {0, 10}, StatusSpamtrap: {0, 10},
	}
	allEvidence(func(ev Evidence) {
		s, r, sc := Decide(ev)
		b, ok := band[s]
		if !ok || sc < b[0] || sc > b[1] {
			t.Fatalf("%+v: %s/%s score %d outside band %v", ev, s, r, sc, b)
		}
		if sc < 0 || sc > 100 {
			t.Fatalf("score %d out of range", sc)
		}
	})
}

// TestScoreMonotone checks that more positive evidence never lowers the
// score and negative evidence never raises it.
func TestScoreMonotone(t *testing.T) {
	allEvidence(func(ev Evidence) {
		_, _, base := Decide(ev)
		more := ev
		more.Auth++
		if _, _, sc := Decide(more); sc < base {
			t.Fatalf("%+v: one more auth signal lowered the score %d → %d", ev, base, sc)
		}
		if !ev.Role {
			role := ev
			role.Role = true
			if _, _, sc := Decide(role); sc > base {
				t.Fatalf("%+v: role raised the score %d → %d", ev, base, sc)
			}
		}
		if ev.CatchAll == CatchAllUnknown {
			no := ev
			no.CatchAll = CatchAllNo
			if _, _, sc := Decide(no); sc < base {
				t.Fatalf("%+v: learning the domain is not catch-all lowered the score %d → %d", ev, base, sc)
			}
		}
		if !ev.Disposable {
			d := ev
			d.Disposable = true
			if _, _, sc := Decide(d); sc > base {
				t.Fatalf("%+v: disposable raised the score", ev)
			}
		}
	})
}
