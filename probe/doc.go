// Package probe is verifyd's validation engine: given an address, it decides
// valid, invalid, risky, unknown, disposable or spamtrap, with a score and
// the checks of spec §2.4-2.5.
//
// The pipeline for one address (Engine.Verify):
//
//  1. Syntax (package probe/address): RFC 5321 paths and limits, RFC 5322
//     dot-atom and quoted local parts, RFC 6531 UTF-8 local parts, IDNA2008
//     (UTS 46) domains. A failure is a result (invalid, syntax_error).
//  2. Lists (package probe/lists): disposable domains, role local parts,
//     free providers, spamtraps; shipped data plus operator overrides.
//  3. MX (route.go, on package resolver): NXDOMAIN is domain_not_found; a
//     null MX (RFC 7505) or neither MX nor address records is no_mx_record;
//     no MX but A/AAAA is an implicit MX (RFC 5321 §5.1); a temporary DNS
//     failure is unknown, never invalid. A spamtrap or a disposable domain is
//     decided here and never probed over SMTP.
//  4. SMTP (session.go, on packages egress and probe/smtpclient): the MX
//     hosts in preference order, each host's addresses in turn, falling to
//     the next when a connection cannot be made. Each session leases a
//     source address from the egress pool (per-destination caps, rate and
//     cooldowns), greets, uses STARTTLS when offered, sends MAIL FROM and the
//     real RCPT TO, then, when that was accepted and the domain's catch-all
//     finding is not cached, one RCPT with a random local part — after the
//     real one, so it cannot spoil it — and QUIT. A refusal of RCPT is read
//     (reading.go) by the provider's rules, a specific RFC 3463 enhanced
//     status, the reply's words (smtpclient.ReadWording), the positive
//     control (control.go: postmaster@, a known-good recipient and a random
//     local part in the same session) and last the bare code; only a
//     refusal something shows to be about the prober cools the egress
//     address.
//  5. Greylisting: a 4xx on RCPT cools the (egress address, MX) pair in the
//     pool; Verify waits out the cooldown and retries from the same address
//     (greylisters remember the client address) while the context's
//     deadline allows, else the result is unknown with RetryAt set.
//  6. Auth signals (auth.go, package probe/authsig), with Options.Auth: the
//     domain's DNS lookups (SPF, DKIM, DMARC, MTA-STS, TLS-RPT, BIMI, CAA,
//     DNSSEC, DANE, reverse DNS, DNS lists, svc trust) start when the MX
//     stage has routed the domain and run during the SMTP stage, which also
//     probes postmaster@ and abuse@ after the catch-all probe; after it,
//     the engine takes what the lookups learnt within the budget left,
//     merges the session's keys (TLS, EHLO name against the PTR name) and
//     counts the positive signals for the score.
//  7. Verdict and score (Decide in verdict.go): one decision table, printed
//     in README.md and tested for every combination of evidence.
//
// Engine.VerifyDomain is the batch mode: many addresses of one domain in as
// few sessions as the MX allows, RCPTs pipelined (RFC 2920), one catch-all
// probe, another session after a 452 4.5.3 recipient limit, greylisted
// addresses handed back with RetryAt instead of waited for.
package probe
