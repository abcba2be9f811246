// Package authsig finds a domain's authentication and deliverability
// signals, the auth object of the receipt (spec §2.6), in two layers.
//
// The record parsers and the posture logic are pure: every function takes
// the records the caller looked up (TXT records already joined from their
// character-strings, one string per record, RFC 7208 §3.3) and returns typed
// results, without I/O. The walks that need several lookups (FollowSPF,
// DiscoverDMARC) take the lookup as a TXTLookup function, so the caller
// decides how DNS is done (its caching resolver, its context and time
// budget) and tests use a map.
//
// The Collector does the lookups, on resolver.Interface: for a domain and
// its first MX host it starts every lookup below at once, in the
// background, while the probe engine runs its SMTP session (at most
// CollectorOptions.Concurrency domains at a time; more wait their turn,
// those of StartUrgent first); Pending.Wait
// takes what was learnt when the session ends, leaving out the keys whose
// lookups failed or had not finished; the outcome is cached per domain for
// the TTLs of its answers. Signals is the auth object with its JSON keys;
// MergeSession and MergeMailboxes add what the SMTP session learnt (TLS,
// the EHLO name against the PTR name, postmaster@ and abuse@). DomainAge
// finds registration dates over RDAP (RFC 9082, RFC 9083, with the RFC 9224
// bootstrap file shipped with the binary) or WHOIS (RFC 3912), in the
// background, never on the path of a probe. README.md has the table of the
// 29 keys and when each is present.
//
// The collector queries these names for a domain D and hands the answers
// to the function named. When a lookup fails (timeout, SERVFAIL), it omits
// the signal's keys from the receipt instead of guessing; NXDOMAIN and NODATA
// are answers (no records), not failures.
//
//  1. spf: TXT at D. SPF picks the one record that begins with "v=spf1"
//     (RFC 7208 §4.5), parses it against the grammar of §12 and reports the
//     posture of its "all" mechanism: strict (-all), softfail (~all), neutral
//     (?all, or neither all nor redirect=, the default result of §4.7), pass
//     (+all or bare all), none (no record), permerror (several records, any
//     syntax error, §4.6). Without "all", a redirect= decides (§6.1): SPF
//     reports "redirect" and its target. FollowSPF does the whole walk through
//     a TXTLookup: it follows redirect=, fetches every include: on the way
//     (§5.2) and counts DNS-querying terms against the limit of 10 (§4.6.4),
//     so the posture it reports is the one a receiver reaches for mail from
//     a host the record does not list.
//
//  2. dkim: TXT at <selector>._domainkey.D (RFC 6376 §3.6.2.1) for each
//     selector of DefaultDKIMSelectors or the operator's list, unless TXT
//     at _domainkey.D, asked first, is NXDOMAIN: then no name below it
//     exists (RFC 8020 §2) and dkim is none. DKIM parses the
//     key record (§3.6.1: v= first if present, k=, p=, h=, s=, t=) and says
//     found, revoked (empty p=), or none (missing, several, or malformed with
//     the reason). Keys must be usable by today's verifiers: RSA of at least
//     1024 bits and not sha1-only (RFC 8301), or ed25519 (RFC 8463).
//     CombineDKIM folds the selectors into the domain's status.
//
//  3. dmarc, dmarc_policy, dmarc_subdomain_policy, dmarc_alignment_spf,
//     dmarc_alignment_dkim, dmarc_rua_set: TXT at _dmarc.D, then, only when D
//     publishes no DMARC record, at _dmarc.<OrgDomain(D)> (RFC 7489 §6.6.3;
//     DiscoverDMARC does both). DMARC keeps the records that begin with
//     v=DMARC1; several give none (step 5). ParseDMARC reads p=, sp=
//     (default p), np=, adkim= and aspf= (r or s, default r), pct=, fo=, ri=,
//     t=, psd=, rua= and ruf= (valid mailto: URIs), leniently: malformed or
//     unknown tags fall back to defaults (RFC 7489 §6.3, RFC 9989 §4.8),
//     except an invalid policy, which keeps the record only if rua= is valid
//     and then as p=none (RFC 7489 §6.6.3 step 6). An absent p= is p=none
//     (RFC 9989 §4.7). OrgDomain uses the public suffix list (RFC 7489 §3.2);
//     the RFC 9989 DNS tree walk (§4.10) is not implemented.
//
//  4. mta_sts: TXT at _mta-sts.D. MTASTS wants exactly one v=STSv1 record
//     with an id of 1 to 32 letters and digits (RFC 8461 §3.1). The HTTPS
//     policy file is not fetched.
//
//  5. tls_rpt: TXT at _smtp._tls.D. TLSRPT wants exactly one v=TLSRPTv1
//     record with a rua= holding a usable mailto: or https: URI (RFC 8460 §3).
//
//  6. bimi, bimi_vmc: TXT at default._bimi.D (BIMI draft §4.2). BIMI wants
//     exactly one v=BIMI1 record with an l= (logo URL, https, may be empty)
//     and an optional a= (evidence document, a VMC, https). bimi is true
//     unless both are empty (a declination); bimi_vmc when a= is set.
//
//  7. caa: CAA at each name of CAANames(D), the domain and its parents below
//     the public suffix (RFC 8659 §3). HasCAA is true when any has a record.
//
//  8. dnsbl_clean, dnsbl_lists_on, dnswl_listed: A at dnsbl.Name(ip, zone)
//     for the MX address ip and each configured list (RFC 5782 §2.1, §2.4).
//     dnsbl.Classify counts only 127.0.0.2-127.255.255.251 as listings; the
//     operators' error codes (127.255.255.252-255), 127.0.0.1 and answers
//     outside 127.0.0.0/8 are errors. ClassifyDNSWL adds dnswl.org's
//     "blocked" code. SummarizeDNSBL gives the two dnsbl keys.
//
//  9. svc_certified, svc_trust_level, svc_key_id: TXT at _svc-trust.D, the
//     verifyd trust programme of README.md. Trust wants exactly one strict
//     "v=SVC1; k=<key id>; l=<1-5>" record whose key id the operator has
//     issued (TrustKeys).
//
//  10. dnssec, dane: the AD bit of the MX answer of D (RFC 4035 §3.2.3, as
//     the validating upstream sets it); when that is set, TLSA at
//     _25._tcp.<MX host> (RFC 7672 §2.2): dane is an authenticated RRset
//     with a DANE-TA(2) or DANE-EE(3) record of a known selector and
//     matching type (§3.1).
//
//  11. ptr, fcrdns: PTR of the first address of the first MX host, then the
//     forward lookup of each PTR name (RFC 8601 §3 iprev).
//
//  12. From the SMTP session (not DNS): tls_version and tls_cipher of
//     STARTTLS, helo_matches_rdns (the EHLO name against the PTR names,
//     RFC 5321 §4.1.4), abuse_mailbox and postmaster_mailbox (RCPT probes,
//     RFC 2142, RFC 5321 §4.5.1). domain_age_days from DomainAge.
//
// Every record grammar above except SPF is a variant of the RFC 6376 §3.2
// tag-list, parsed by one parser (ParseTagList and its internal variants):
// whitespace around tags, empty values, one trailing ";", duplicates
// refused (DMARC alone keeps them and judges them per tag).
//
// Results carry an Err field that says why a record that exists did not
// count (a *SyntaxError, or a sentinel such as ErrMultipleRecords); it is for
// logs, never for the receipt. The String methods give the exact values the
// auth object uses.
package authsig
