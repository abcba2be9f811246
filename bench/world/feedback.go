package world

// feedbackMix sets o's behaviour fractions to ProfileFeedback's: of the
// domains, 62 % plain, 12 % accept-then-bounce, 8 % true catch-alls, 6 %
// catch-alls that drop mail for unknown users, 5 % greylisting, 3 % that
// block the prober (5.7.1: verified unknown, delivered or bounced as the
// mailbox is), 2 % NXDOMAIN and 2 % null MX; of the known mailboxes, 3 %
// full at RCPT, 4 % over quota at delivery, 4 % disabled; one delivery
// to a mailbox in 500 is a complaint. Counts, seed, addresses per domain
// and the host settings stay the caller's; 200 domains when none is set.
func feedbackMix(o *GenOptions) {
	if o.Domains == 0 {
		o.Domains = 200
	}
	o.CatchAll, o.AcceptThenBounce, o.DropUnknown = 0.08, 0.12, 0.06
	o.Greylist, o.Reject, o.NXDomain, o.NullMX = 0.05, 0.03, 0.02, 0.02
	o.Tarpit, o.Refuse, o.Busy, o.NoMX, o.ImplicitMX, o.ServFail = 0, 0, 0, 0, 0, 0
	o.MailboxFull, o.MailboxOverQuota, o.MailboxDisabled = 0.03, 0.04, 0.04
	o.ComplaintRate = 0.002
}
