package platform

import "testing"

func TestParseSMTP(t *testing.T) {
	for _, c := range []struct {
		diag     string
		code     int
		enhanced string
	}{
		{"smtp; 550 5.1.1 <x@y>: Recipient address rejected: User unknown", 550, "5.1.1"},
		// Gmail.
		{"smtp; 550-5.1.1 The email account that you tried to reach does not exist. Please try\n550-5.1.1 double-checking the recipient's email address for typos or\n550 5.1.1 unnecessary spaces. https://support.google.com/mail/?p=NoSuchUser d2si1234567qkf.123 - gsmtp", 550, "5.1.1"},
		{"452-4.2.2 The email account that you tried to reach is over quota. Please direct\n452 4.2.2 the recipient to https://support.google.com/mail/?p=OverQuotaTemp", 452, "4.2.2"},
		{"550-5.7.26 This mail is unauthenticated, which poses a security risk to the sender and Gmail users", 550, "5.7.26"},
		{"421-4.7.28 [198.51.100.7 15] Our system has detected an unusual rate of unsolicited mail", 421, "4.7.28"},
		// Outlook, Microsoft 365.
		{"Remote server returned '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'", 550, "5.1.10"},
		{"smtp;550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302). [BN8NAM12FT061.eop-nam12.prod.protection.outlook.com]", 550, "5.5.0"},
		{"550 5.7.1 Unfortunately, messages from [198.51.100.7] weren't sent. Please contact your Internet service provider (S3150).", 550, "5.7.1"},
		{"451 4.7.650 The mail server [198.51.100.7] has been temporarily rate limited due to IP reputation.", 451, "4.7.650"},
		// Yahoo, AOL.
		{"smtp; 554 delivery error: dd This user doesn't have a yahoo.com account (x@yahoo.com) [0] - mta1011.mail.ne1.yahoo.com", 554, ""},
		{"421 4.7.0 [TSS04] Messages from 198.51.100.7 temporarily deferred due to unexpected volume or user complaints - 4.16.55.1; see https://postmaster.yahooinc.com/error-codes", 421, "4.7.0"},
		{"554 30 Sorry, your message to x@aol.com cannot be delivered. This mailbox is disabled (554.30).", 554, ""},
		// Postfix.
		{"host mx.example.com[192.0.2.25] said: 550 5.1.1 <ann@example.com>: Recipient address rejected: User unknown in local recipient table (in reply to RCPT TO command)", 550, "5.1.1"},
		{"X-Postfix; Host or domain name not found. Name service error for name=example.invalid type=MX: Host not found, try again", 0, ""},
		{"smtp; 552 5.2.2 <ann@example.com>: Recipient address rejected: Mailbox full", 552, "5.2.2"},
		// Exim.
		{"SMTP error from remote mail server after RCPT TO:<ann@example.com>: 550 5.1.1 <ann@example.com>... User unknown", 550, "5.1.1"},
		{"smtp; 550 Unrouteable address", 550, ""},
		{"550-Verification failed for <news@sender.example>\n550-Called:   192.0.2.25\n550 Sender verify failed", 550, ""},
		{"retry timeout exceeded", 0, ""},
		// Others and edges.
		{"550 #5.1.0 Address rejected.", 550, "5.1.0"},
		{"Amazon SES did not send the message to this address because it is on the suppression list for your account.", 0, ""},
		{"Mailbox quota 250 MB exceeded, 5.2.2", 0, "5.2.2"},
		{"quota of 500 MB reached: 552 5.2.2 Mailbox full", 552, "5.2.2"},
		{"250 2.0.0 OK", 250, "2.0.0"},
		{"250 OK", 250, ""},
		{"delivered at 10.0.0.1", 0, ""},
		{"relay 5.1.1.1 refused", 0, ""},
		{"status 5.1.1.", 0, "5.1.1"},
		{"5.1.1", 0, "5.1.1"},
		{"550", 550, ""},
		{"v5.1.1 x550", 0, ""},
		{"1550 5.1.1234 6.1.1 550.1", 0, ""},
		{"354 go ahead", 0, ""},
		{"", 0, ""},
	} {
		code, enh := ParseSMTP(c.diag)
		if code != c.code || enh != c.enhanced {
			t.Errorf("ParseSMTP(%q) = %d %q, want %d %q", c.diag, code, enh, c.code, c.enhanced)
		}
	}
}

func TestValidEnhanced(t *testing.T) {
	for s, want := range map[string]bool{
		"5.1.1": true, "4.7.650": true, "2.0.0": true, "5.1.10": true,
		"": false, "5.1": false, "3.1.1": false, "5.1.1 ": false, " 5.1.1": false,
		"5.1.1.1": false, "5.1234.1": false, "5.1.1a": false, "55.1.1": false,
	} {
		if got := validEnhanced(s); got != want {
			t.Errorf("validEnhanced(%q) = %v", s, got)
		}
	}
}
