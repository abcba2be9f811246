// Package egress owns the pool of source IP addresses the prober's SMTP
// sessions leave from: which address a session uses, how many sessions
// and how many new ones per second each MX may get, and which addresses
// must hold back from a destination for a while. No session leaves from an
// address outside the pool: the prober dials only through a Lease.
//
// A session goes through these steps:
//
//  1. Acquire. The engine asks for a lease to the MX address it will dial:
//     pool.Acquire(ctx, mxIP, prefer). Limits are keyed by that IP address,
//     not by the MX host name. Eligible are the pool addresses of the
//     destination's family (the system address, used when the pool is
//     configured empty, serves both) that are neither disabled nor
//     draining; if none is left the answer is ErrNoAddress. Addresses
//     cooling for the destination are skipped, and if every eligible one is
//     cooling Acquire returns at once a *CoolingError (errors.Is
//     ErrAllCooling) with the earliest RetryAt: it never waits out a
//     cooldown. Of the rest, prefer is taken if it has a free slot
//     (greylisting remembers the triplet of client IP, sender and
//     recipient, RFC 6647, so a retry should leave from the same address), else the address with the fewest sessions in flight to the
//     destination, ties broken round-robin, so load spreads over the pool.
//     When every one has Options.MaxConnsPerHost sessions to the
//     destination, Acquire waits (first come, first served) for a Release,
//     or for the first cooldown of an eligible address to end.
//     Then it takes a token of the destination's bucket
//     (Options.MaxRatePerHost new sessions per second, all addresses
//     together, burst max(1, rate)) and sleeps until that token is due.
//     Both waits end with the context. No lock is held while waiting: each
//     destination has its own mutex, found in a sharded map.
//  2. Dial. Lease.DialContext connects from the leased address
//     (net.Dialer.LocalAddr) and only to the leased destination; it is the
//     smtpclient.Dialer of the session. An address the host cannot bind
//     (EADDRNOTAVAIL) is disabled with an EventDisabled.
//  3. Release. The session ends with lease.Release(outcome), exactly once.
//     The outcome (see Outcome; the engine maps smtpclient classes onto
//     them) frees the slot, wakes a waiting Acquire and counts in the
//     address's health: totals by outcome and the last 32 outcomes.
//  4. Cooldown. OutcomeGreylisted (a 4xx to RCPT), OutcomeRateLimited
//     (421, the server closing the channel, RFC 5321 §3.8, or a 4.7.x
//     "too many connections") and OutcomePolicy (a refusal of the prober
//     itself, by its words or its place, not of a mailbox) cool the
//     pair (address, destination)
//     for GreylistCooldown × 2^repeats, at most MaxCooldown, with an
//     EventCooldown or EventPolicyBlock. Such a reply on a pair already
//     cooling (from a session that began earlier) neither extends nor
//     escalates it. OutcomeOK resets the pair's backoff (so does
//     Lease.Succeeded, for a session kept open after a good transaction,
//     whose Release comes later); a pair left alone
//     MaxCooldown past its cooldown starts over too. Retrying later,
//     rather than at once, is RFC 5321 §4.5.4.1's rule for a sender.
//     An address whose share of sessions blocked by policy, from at least
//     PolicyBlockThreshold distinct destinations within PolicyBlockWindow,
//     reaches ReputationShare and twice the rest of the pool's raises an
//     EventReputation, the source of the reputation.warning webhook.
//  5. Retry. In real time, the engine may wait for
//     CooldownUntil(addr, dest) if it falls within the request's budget and
//     then Acquire with prefer = addr; beyond the budget the verdict is
//     unknown. A batch job stores RetryAt(dest) (or the CoolingError's
//     RetryAt) and comes back then.
//
// Operators change the pool live: SetAddresses (SIGHUP) adds addresses at
// once and drains the removed ones (no new lease, those in flight finish,
// then EventDrained); Disable and Enable take an address out of rotation
// and back (the self-check, verifyctl), with events. Snapshot reports
// every address: sessions in flight, outcome totals and recent outcomes,
// cooldowns per destination, draining and disabled flags.
//
// The self-check (SelfCheck, every egress.self_check_interval through
// RunSelfChecks) judges each named address as receiving MTAs will:
//
//  1. PTR. The address's reverse DNS names, each looked up forward; those
//     that resolve back to the address are forward-confirmed (FCrDNS). No
//     PTR, or none confirmed, is a finding. The first confirmed name
//     becomes the address's HELO name when none is configured
//     (SetDiscoveredHelo; DiscoverHeloNames does only this, for a verifyd
//     whose self-check is off).
//  2. HELO. The name the address says in EHLO (HeloName) must be one of
//     its PTR names.
//  3. DNS block lists. The address is looked up on every configured zone
//     (package dnsbl, RFC 5782); a listing is a finding, an operator's
//     error code or a failed lookup is not.
//  4. Enforce. A failing address is disabled (never the last active one),
//     and enabled again once it passes; the findings are kept for
//     Snapshot (SetFindings).
//
// The cooldowns not yet expired, the health totals and the disabled flags
// survive a restart through Options.Store, saved as JSON at most every
// SaveInterval when changed, and at Close. Every time comes from
// Options.Now and every rate wait goes through Options.Sleep, so tests
// drive the clock. README.md lists the metrics.
package egress
