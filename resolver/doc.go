// Package resolver is verifyd's caching DNS resolver, a stub that forwards
// to configured recursive resolvers (miekg/dns on the wire) and keeps what
// they answer in a bounded in-memory cache. The probe engine depends on
// Interface; *Resolver implements it.
//
// A lookup goes through these steps:
//
//  1. Name. The name is normalised (normalize in name.go): a trailing dot is
//     dropped (every name is taken as fully qualified, RFC 1035 §3.1), ASCII
//     is lower-cased, and a label with non-ASCII characters is converted to
//     its A-label by IDNA2008 with the UTS 46 lookup profile (RFC 5891 §5,
//     golang.org/x/net/idna Lookup). ASCII labels keep underscores ("_dmarc",
//     "_25._tcp"), which the UTS 46 STD3 rules would refuse. An empty name, an
//     empty label, a label over 63 octets or a name over 253 characters
//     (RFC 1035 §2.3.4) is an error wrapping ErrInvalidName, and no query is
//     sent.
//  2. Cache. The cache (cache.go) is keyed by (name, type) and holds the
//     already typed result, so a hit returns without parsing anything. It is
//     sharded; each shard evicts by CLOCK (second chance) when it holds more
//     than its share of Options.CacheEntries or Options.CacheBytes.
//  3. In-flight deduplication (begin, wait and fly in resolver.go). On a
//     miss, concurrent lookups of one (name, type) share one upstream
//     query. The query runs on one of the resolver's worker goroutines
//     (at most Options.MaxInFlight; further queries wait in a FIFO queue,
//     workers.go) under the resolver's own deadlines, so a caller whose
//     context ends returns early (a temporary failure) without cancelling
//     the query the others wait for; its answer is still cached.
//  4. Upstreams (upstream.go). The query is sent over UDP with EDNS0
//     (RFC 6891: a 1232-octet buffer and the DO bit, RFC 3225) and RD set,
//     from a pooled connected UDP socket; a reply is accepted only if its ID
//     and question match (late replies to earlier queries on a reused socket
//     are discarded). A truncated reply (TC) is retried over TCP (RFC 7766),
//     on a pooled connection. Upstreams are tried in order, each try bounded
//     by Options.Timeout; a timeout, network error, SERVFAIL, REFUSED or any
//     other error rcode fails over to the next upstream, for
//     Options.Attempts passes over the list. An upstream that fails
//     Options.HealthFailures times in a row (timeouts, network errors,
//     REFUSED, malformed replies; a SERVFAIL is about the queried domain and
//     does not count) is skipped for Options.HealthCooldown, unless every
//     upstream is down.
//  5. Classification (result.go). The reply becomes one of four statuses:
//     StatusAnswer (records of the type, found at the name or at the end of
//     a CNAME chain in the answer section), StatusNXDomain (RCODE 3),
//     StatusNoData (NOERROR without such records, RFC 2308 §2.2) or
//     StatusTempFail (every upstream timed out or failed). The AD bit of the
//     reply is passed through. Typed views are built once: MX sorted by
//     preference then host, with the null MX of RFC 7505 ("0 .") reported as
//     MXResult.NullMX; A and AAAA as netip.Addr; TXT with the strings of one
//     record joined; PTR; TLSA; CAA.
//  6. Caching the result. A positive answer is kept for the smallest TTL of
//     the records used, clamped to [Options.MinTTL, Options.MaxTTL]. A
//     negative answer (NXDOMAIN, NODATA) is kept for min(SOA TTL, SOA
//     MINIMUM) of the SOA in the authority section (RFC 2308 §5), clamped to
//     [Options.MinTTL, Options.NegativeMaxTTL]; without a SOA it is not kept.
//     Temporary failures are not kept. With Options.ServeStale, an expired
//     entry is kept Options.StaleTTL longer, and when every upstream fails it
//     is returned marked Stale with a TTL of 30 seconds, during which no new
//     query is made for it (RFC 8767 §4, §5). With Options.Prefetch, the
//     first hit in the last tenth of an entry's TTL starts a background
//     query that replaces it (a failed one leaves it until it expires).
//
// Every lookup but a malformed name reports one status, and a non-answer
// status comes with an *Error that wraps ErrNXDomain, ErrNoData or
// ErrTemporary, so callers can tell them apart with errors.Is.
//
// Results share memory with the cache: the slices in a result (MX hosts,
// addresses, TXT strings, raw records) must not be modified.
//
// The clock (Options.Now) is injected: cache expiry and upstream cooldowns
// follow it, so tests move time instead of sleeping. Network deadlines use
// the real clock.
//
// Metrics are listed in README.md and defined in metrics.go.
package resolver
