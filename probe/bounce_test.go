package probe

import "testing"

func TestBounceNoMailbox(t *testing.T) {
	for _, tc := range []struct {
		code           int
		enhanced, text string
		mx             string
		want           bool
	}{
		{550, "5.1.1", "The email account that you tried to reach does not exist.", "gmail-smtp-in.l.google.com", true},
		{550, "5.1.10", "RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", "x.mail.protection.outlook.com", true},
		{0, "5.1.1", "user unknown", "", true},
		{554, "", "delivery error: dd This user doesn't have a yahoo.com account", "mta5.am0.yahoodns.net", true},
		{554, "", "delivery error: dd This user doesn't have a yahoo.com account", "mx.self-hosted.example", false},
		{550, "", "User unknown", "mx.example", false}, // a bare 550 is also sent for spam
		{550, "5.7.1", "Message rejected as spam", "mx.example", false},
		{552, "5.2.2", "Mailbox full", "mx.example", false},
		{450, "4.1.1", "try again", "mx.example", false},
		{550, "5.2.1", "mailbox disabled", "mx.example", false},
		{0, "", "", "", false},
	} {
		if got := BounceNoMailbox(tc.code, tc.enhanced, tc.text, tc.mx); got != tc.want {
			t.Errorf("BounceNoMailbox(%d, %q, %q, %q) = %v, want %v", tc.code, tc.enhanced, tc.text, tc.mx, got, tc.want)
		}
	}
}
