// Package config is verifyd's configuration: one struct, documented field by
// field, read from TOML, with Defaults for every field and a Validate that
// reports every problem at once, naming the TOML key of each.
//
// Loading goes:
//
//  1. Defaults: every field gets its default, so verifyd runs with no file at
//     all (the embedded default).
//  2. Load decodes the file over the defaults; a key the struct does not know
//     is an error, not silently ignored (a typo in an ops file must not pass).
//  3. Validate checks every field and joins all problems into one error.
//
// Durations are TOML strings in Go syntax ("10s", "1m30s"). The defaults are
// listed in the README's configuration section and in `verifyd -print-config`.
package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/authsig"
	"github.com/verifyd/verifyd/resolver"
	"github.com/verifyd/verifyd/server"
	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/batch"
	"github.com/verifyd/verifyd/server/conns"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/tlsserve"
	"github.com/verifyd/verifyd/server/web"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage/pebble"
	"github.com/verifyd/verifyd/storage/postgres"
)

// DefaultPath is where verifyd looks for its file when -config is not given.
const DefaultPath = "/etc/verifyd/verifyd.toml"

// Config is the whole configuration of verifyd.
type Config struct {
	// DataDir holds the Pebble database and other state. Default: the
	// directory systemd gives in $STATE_DIRECTORY (/var/lib/verifyd under the
	// shipped unit), else ./data.
	DataDir string `toml:"data_dir"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// LogFormat is json, text or auto (text on a terminal, JSON otherwise,
	// e.g. under systemd where journald stores it).
	LogFormat string `toml:"log_format"`
	// DemoAccount creates a demo account on an empty data directory: 1,000
	// credits and one key with both scopes, whose secret is printed once
	// to standard output. On for the embedded defaults (make run, no
	// configuration file); off otherwise, so that an operator's box never
	// gets an account, or a secret in its journal, it did not ask for.
	DemoAccount bool `toml:"demo_account"`

	Storage    Storage    `toml:"storage"`
	HTTP       HTTP       `toml:"http"`
	Admin      Admin      `toml:"admin"`
	Metrics    Metrics    `toml:"metrics"`
	Resolver   Resolver   `toml:"resolver"`
	SMTP       SMTP       `toml:"smtp"`
	Egress     Egress     `toml:"egress"`
	Probe      Probe      `toml:"probe"`
	Limits     Limits     `toml:"limits"`
	RateLimits RateLimits `toml:"rate_limits"`
	Webhooks   Webhooks   `toml:"webhooks"`
	Jobs       Jobs       `toml:"jobs"`
	Auth       Auth       `toml:"auth"`
	Outcomes   Outcomes   `toml:"outcomes"`
}

// Storage is where the shared state lives: accounts, keys, credits,
// history, jobs, webhooks, users and signing keys (docs/fleet.md).
type Storage struct {
	// Backend is pebble (this box's data_dir, the default) or postgres:
	// every verifyd pointing at the same PostgreSQL database is one
	// service, a fleet. What stays on each box (egress
	// health, greylist cooldowns, resolver cache) is in data_dir either
	// way.
	Backend string `toml:"backend"`
	// DSN is the database's connection string, for postgres, e.g.
	// "postgres://verifyd@db1:5432/verifyd?sslmode=verify-full"; keep the
	// password out of it (PGPASSFILE, or a client certificate). A primary
	// and its standbys: name them all ("db1:5432,db2:5432"); verifyd
	// connects to the one that takes writes (target_session_attrs
	// read-write, set when the DSN names several and does not say;
	// docs/fleet.md, High availability). The environment variable VERIFYD_PG_DSN, when set,
	// is used instead.
	DSN string `toml:"dsn"`
	// Box names this verifyd among the fleet's, in logs and in the
	// ledger's notes. Default the host name.
	Box string `toml:"box"`
	// Lease is how long a box not heard from is taken as stopped: its
	// holds are released, its job slices and webhook deliveries go to
	// the others. Default 30s.
	Lease time.Duration `toml:"lease"`
	// CallTimeout bounds one call to the database (postgres): past it
	// the request answers 500 INTERNAL (retryable) instead of waiting on
	// a slow or silent link. Default 30s.
	CallTimeout time.Duration `toml:"call_timeout"`
	// CreditLeases (postgres): a box that validates for an account many
	// times a second holds a block of its credits (at most 1 % of those
	// available, 10,000 at most, only while 10,000 are available) and
	// hands each validation its credit from it, so a validation costs
	// the database its charge alone; the block's rest goes back after
	// 2 s without a validation (docs/fleet.md, Credit leases). Default
	// true.
	CreditLeases bool `toml:"credit_leases"`
	// ChargeGather (postgres): while an account's charges arrive on a
	// box more often than once per ChargeGather, each transaction of its
	// charges waits that long first and takes every charge that came
	// meanwhile: fewer transactions, less database CPU a validation, for
	// that much latency (docs/fleet.md, One account's charges,
	// combined). 0s: none. Default 5ms.
	ChargeGather time.Duration `toml:"charge_gather"`
	// MinFreeBytes is the free space of data_dir's file system below
	// which the box's Pebble refuses writes: requests that write answer
	// 503 (nothing charged), running jobs pause, and all goes on by
	// itself once space is freed. Pebble stops the process when the disk
	// is full, so this reserve keeps room for its own flushes and
	// compactions. Default 268435456 (256 MiB); 0: no guard.
	MinFreeBytes int64 `toml:"min_free_bytes"`
}

// Auth configures the account surface: /auth/* and the dashboard
// (server/web).
type Auth struct {
	// Registration is who may create a user with POST /auth/register:
	// closed (nobody; operators add users with verifyctl), invite (with
	// an invitation from an account owner or an operator) or open
	// (anyone; each gets a new account on OpenPlan with OpenCredits).
	// Default closed.
	Registration string `toml:"registration"`
	// OpenPlan and OpenCredits are the plan and starting credits of an
	// account made by open registration. Defaults free and 0.
	OpenPlan    string `toml:"open_plan"`
	OpenCredits int64  `toml:"open_credits"`
	// SessionLifetime ends a session this long after sign-in;
	// SessionIdle after this long unused. Defaults 168h and 12h.
	SessionLifetime time.Duration `toml:"session_lifetime"`
	SessionIdle     time.Duration `toml:"session_idle"`
	// InviteLifetime is how long an invitation may be redeemed. Default
	// 168h.
	InviteLifetime time.Duration `toml:"invite_lifetime"`
	// SecureCookie is auto (Secure when the request came over TLS or
	// through a trusted proxy with X-Forwarded-Proto: https), always or
	// never. Default auto.
	SecureCookie string `toml:"secure_cookie"`
	// The per source IP limits of spec §8: requests per window. Defaults
	// link 5 per 10m, register 20 per 1h, login 30 per 10m; tests shorten
	// the windows.
	LinkLimit      int           `toml:"link_limit"`
	LinkWindow     time.Duration `toml:"link_window"`
	RegisterLimit  int           `toml:"register_limit"`
	RegisterWindow time.Duration `toml:"register_window"`
	LoginLimit     int           `toml:"login_limit"`
	LoginWindow    time.Duration `toml:"login_window"`
	// Argon2MemoryKiB, Argon2Iterations and Argon2Parallelism are the
	// cost of a password hash (RFC 9106). Defaults 65536 (64 MiB), 3, 1.
	// Hashes keep the cost they were made with; a sign-in remakes an
	// older one at the current cost.
	Argon2MemoryKiB   int `toml:"argon2_memory_kib"`
	Argon2Iterations  int `toml:"argon2_iterations"`
	Argon2Parallelism int `toml:"argon2_parallelism"`
}

// HTTP is the public API listener.
type HTTP struct {
	// Listen is the address of the public API. Default 127.0.0.1:8080.
	Listen string `toml:"listen"`
	// TrustedProxies are addresses or CIDR prefixes whose X-Forwarded-For
	// header is believed for the client address (rate limits key on it).
	// Default none: the socket's peer is the client.
	TrustedProxies []string `toml:"trusted_proxies"`
	// IPv6PrefixLen is how many leading bits of an IPv6 client address
	// name one client for every per-client limit: max_conns_per_ip,
	// [rate_limits], the /auth/* limits and the failed-login delays. A
	// host is commonly given a whole /64 and can use any of its
	// addresses, so one address per client would let it rotate past them.
	// An IPv4 address (IPv4-mapped ones too) is always one client.
	// Default 64; 1 to 128.
	IPv6PrefixLen int `toml:"ipv6_prefix_len"`
	// ReadTimeout bounds reading one request. Default 30s.
	ReadTimeout time.Duration `toml:"read_timeout"`
	// WriteTimeout bounds writing one response. Default 60s.
	WriteTimeout time.Duration `toml:"write_timeout"`
	// IdleTimeout closes idle keep-alive connections. Default 2m.
	IdleTimeout time.Duration `toml:"idle_timeout"`
	// MaxHeaderBytes bounds a request's head (request line and header
	// fields); a larger one is answered 431. Each open connection holds a
	// read buffer of this size. Default 16384 (16 KiB); 4096 to 1048576.
	MaxHeaderBytes int `toml:"max_header_bytes"`
	// RequestTimeout is the deadline of one /v1 request's work below HTTP:
	// its storage calls (a request waiting on a database lock answers 500
	// INTERNAL when it passes, safe to retry with its Idempotency-Key) and
	// its engine run. It must exceed
	// probe.realtime_budget. Default 30s.
	RequestTimeout time.Duration `toml:"request_timeout"`
	// ShutdownTimeout bounds the graceful drain on SIGTERM. Default 20s.
	ShutdownTimeout time.Duration `toml:"shutdown_timeout"`
	// MaxConns caps the connections open at once; MaxConnsPerIP those
	// from one client address (trusted proxies are exempt). A connection
	// over a cap is answered 429 RATE_LIMITED with Retry-After: 1 and
	// closed. 0 means no cap. Defaults 8192 and 512.
	MaxConns      int `toml:"max_conns"`
	MaxConnsPerIP int `toml:"max_conns_per_ip"`
	// LingerTimeout and LingerBytes bound the lingering close (RFC 9112
	// §9.6): after answering a request it did not read to the end (a body
	// over the limit), verifyd reads and discards what the client still
	// sends for at most this long and this much, so the client reads the
	// answer instead of a TCP reset. Defaults 5s and 32 MiB.
	LingerTimeout time.Duration `toml:"linger_timeout"`
	LingerBytes   int64         `toml:"linger_bytes"`
	// TLSCert and TLSKey are PEM files of a certificate (its chain after
	// it) and its key: set, http.listen serves HTTPS (TLS 1.2 and 1.3)
	// instead of plain HTTP. SIGHUP reads them again, from the paths the
	// file then names, with no connection dropped; a pair that does not
	// load (or has expired) is refused and the running one kept. Default
	// none.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// ACMEHosts, instead of TLSCert and TLSKey, are the host names
	// http.listen serves HTTPS for with certificates obtained and renewed
	// from an ACME CA (RFC 8555; Let's Encrypt by default), kept in
	// <data_dir>/acme. The CA must reach this box at the names: on port
	// 443 (tls-alpn-01, answered by http.listen) or port 80 (http-01,
	// answered by http.redirect_listen). Default none.
	ACMEHosts []string `toml:"acme_hosts"`
	// ACMEEmail is the ACME account's contact for the CA's notices.
	ACMEEmail string `toml:"acme_email"`
	// ACMEDirectory is the CA's directory URL. Default Let's Encrypt's
	// production directory.
	ACMEDirectory string `toml:"acme_directory"`
	// ACMECAFile is a PEM file of the CAs that sign the ACME server's own
	// HTTPS certificate (a private ACME CA); default the system's roots.
	ACMECAFile string `toml:"acme_ca_file"`
	// RedirectListen, with TLS, is a plain-HTTP listener ("0.0.0.0:80")
	// that answers every request with a 308 to the same host and path
	// over HTTPS, and the ACME http-01 challenges. Default none.
	RedirectListen string `toml:"redirect_listen"`
	// HSTSMaxAge, with TLS, is Strict-Transport-Security's max-age on
	// every HTTPS answer (RFC 6797); 0 sends none. Default 8760h (a year).
	HSTSMaxAge time.Duration `toml:"hsts_max_age"`
}

// TLS reports whether http.listen serves HTTPS, from files or ACME.
func (h HTTP) TLS() bool { return h.TLSCert != "" || len(h.ACMEHosts) > 0 }

// Admin is the operator API on a unix socket (verifyctl talks to it).
type Admin struct {
	// Socket is the unix socket path, created with mode 0600. Default:
	// $RUNTIME_DIRECTORY/admin.sock under systemd, else <data_dir>/admin.sock.
	Socket string `toml:"socket"`
}

// Metrics is the Prometheus listener, separate from the public API.
type Metrics struct {
	// Listen is the address serving /metrics; empty disables it.
	// Default 127.0.0.1:9464.
	Listen string `toml:"listen"`
	// Pprof also serves Go's runtime profiles (net/http/pprof: heap,
	// goroutine, CPU profile, trace) under /debug/pprof/ on the metrics
	// listener, for diagnosing memory and CPU use. They reveal the
	// process's internals; keep the listener on loopback. Default false.
	Pprof bool `toml:"pprof"`
}

// Resolver configures the caching DNS resolver.
type Resolver struct {
	// Upstreams are "ip:port" DNS servers. Default: the nameservers of
	// /etc/resolv.conf.
	Upstreams []string `toml:"upstreams"`
	// Timeout is the per-upstream query timeout. Default 2s.
	Timeout time.Duration `toml:"timeout"`
	// MinTTL and MaxTTL clamp the TTL of cached answers. Defaults 30s, 1h.
	MinTTL time.Duration `toml:"min_ttl"`
	MaxTTL time.Duration `toml:"max_ttl"`
	// NegativeMaxTTL caps how long NXDOMAIN/NODATA is cached. Default 5m.
	NegativeMaxTTL time.Duration `toml:"negative_max_ttl"`
	// CacheEntries bounds the cache. Default 200000.
	CacheEntries int `toml:"cache_entries"`
	// ServeStale answers from expired entries when every upstream fails
	// (RFC 8767). Default false.
	ServeStale bool `toml:"serve_stale"`
	// Prefetch refreshes a cached answer in the background when a lookup
	// finds it in the last tenth of its TTL, and the auth signals of a
	// domain likewise: names in steady use never expire under the
	// validations that need them. Default true.
	Prefetch bool `toml:"prefetch"`
	// MaxInFlight bounds the upstream queries in flight at once; more wait
	// for a free worker. Each holds a goroutine, a socket and a buffer, and
	// thousands at once (a big batch's auth signals) answer no sooner and
	// overflow the upstream's receive buffer. Default 256.
	MaxInFlight int `toml:"max_inflight"`
}

// SMTP configures the prober's SMTP sessions.
type SMTP struct {
	// Port is the port of the MX hosts. Default 25; tests and the simulated
	// world use another.
	Port int `toml:"port"`
	// HeloName, when set, is the name every egress address without a name
	// of its own (egress.helo_names, or its verifyd-egress@ unit) says in
	// EHLO/HELO: for pools behind one NAT name. Default empty: each address
	// says its own forward-confirmed reverse DNS name, as the self-check
	// finds it, and the host's name until then or when it has none.
	HeloName string `toml:"helo_name"`
	// MailFrom is the reverse-path of the probes. Default verify@ the
	// session's HELO name.
	MailFrom string `toml:"mail_from"`
	// ConnectTimeout bounds the TCP connect. Default 10s.
	ConnectTimeout time.Duration `toml:"connect_timeout"`
	// CommandTimeout bounds each reply (banner included). Default 30s
	// (RFC 5321 §4.5.3.2 allows servers minutes; real-time requests are
	// bounded by probe.realtime_budget anyway).
	CommandTimeout time.Duration `toml:"command_timeout"`
	// GreetingTimeout bounds the wait for a server's greeting, which RFC
	// 5321 §4.5.3.2.1 lets take 5 minutes. Default 60s; at least
	// command_timeout.
	GreetingTimeout time.Duration `toml:"greeting_timeout"`
	// MaxMXHosts caps the MX addresses one validation connects to, in
	// preference order (Postfix's smtp_mx_address_limit). Default 5.
	MaxMXHosts int `toml:"max_mx_hosts"`
	// SessionTimeout bounds a whole session. Default 2m.
	SessionTimeout time.Duration `toml:"session_timeout"`
	// StartTLS uses STARTTLS when the server offers it. Default true.
	StartTLS bool `toml:"starttls"`
}

// Egress configures the pool of source addresses.
type Egress struct {
	// Addresses are the source IP addresses SMTP connections bind to. Empty
	// (here and in AddressesDir) means the system's choice (one unnamed
	// address).
	Addresses []string `toml:"addresses"`
	// HeloNames gives addresses a HELO name of their own, keyed by address:
	// { "192.0.2.10" = "probe1.example.com", ... }. An address named here
	// or in its file of AddressesDir says that name, whatever
	// smtp.helo_name says.
	HeloNames map[string]string `toml:"helo_names"`
	// AddressesDir adds one egress address per file, the file's name being
	// the address ("192.0.2.10", "2001:db8::10"; names starting with "."
	// skipped); the file may hold a "helo_name = NAME" line. The verifyd-egress@ADDR.service units
	// create and remove these files; verifyd reads the directory at start
	// and on every reload (SIGHUP), so removing a file drains the address.
	// A missing directory adds nothing; empty disables the feature.
	// Default /run/verifyd-egress (under /run so that the set of files is
	// exactly the set of active units, also after a crash or power loss).
	AddressesDir string `toml:"addresses_dir"`
	// MaxConnsPerHost caps concurrent sessions per (egress address, MX host).
	// Default 4.
	MaxConnsPerHost int `toml:"max_conns_per_host"`
	// MaxRatePerHost caps new sessions per second per MX host, all egress
	// addresses together. Default 20.
	MaxRatePerHost float64 `toml:"max_rate_per_host"`
	// GreylistCooldown is the first cooldown of an (egress, destination)
	// pair after a greylisting reply; it doubles on repeats. Default 60s.
	GreylistCooldown time.Duration `toml:"greylist_cooldown"`
	// MaxCooldown caps the cooldown backoff. Default 30m.
	MaxCooldown time.Duration `toml:"max_cooldown"`
	// SelfCheckInterval is how often every egress address is checked as
	// receiving MTAs judge it: forward-confirmed reverse DNS, the HELO name
	// among its PTR names, no listing on probe.dnsbl_zones. Default 10m;
	// 0 disables the check.
	SelfCheckInterval time.Duration `toml:"self_check_interval"`
	// SelfCheckEnforce takes failing addresses out of rotation (never the
	// last active one) and back in once they pass; false only reports.
	// Default true.
	SelfCheckEnforce bool `toml:"self_check_enforce"`
}

// Probe configures the validation engine.
type Probe struct {
	// RealtimeBudget is the time a single validation may take, greylist
	// retries included. Default 15s.
	RealtimeBudget time.Duration `toml:"realtime_budget"`
	// RealtimeWorkers sizes the real-time pool. Default 512.
	RealtimeWorkers int `toml:"realtime_workers"`
	// BatchWorkers sizes the batch pool. Default 1024.
	BatchWorkers int `toml:"batch_workers"`
	// BatchShare is how many batch domains may be probed at once while
	// real-time validations are in flight, at most: the share adapts
	// below it to real-time pressure. Default 64; -1: no limit.
	BatchShare int `toml:"batch_share"`
	// BatchSchedTarget and BatchQueueTarget are the adaptive share's
	// pressure signals (probe.Options): the Go scheduler's mean latency
	// and a real-time validation's wait for a worker. Defaults 100µs and
	// 10ms; -1s turns a signal off.
	BatchSchedTarget time.Duration `toml:"batch_sched_target"`
	BatchQueueTarget time.Duration `toml:"batch_queue_target"`
	// CatchAllTTL is how long a domain's catch-all finding is reused.
	// Default 24h.
	CatchAllTTL time.Duration `toml:"catch_all_ttl"`
	// ListsDir holds operator override lists (disposable.txt, free.txt,
	// role.txt, spamtrap.txt). Default /etc/verifyd/lists.
	ListsDir string `toml:"lists_dir"`
	// CacheMaxAge is how old an account's own result may be to answer a
	// request with cache=true. Default 24h.
	CacheMaxAge time.Duration `toml:"cache_max_age"`
	// DKIMSelectors are probed for the dkim signal. Default: the engine's
	// documented list.
	DKIMSelectors []string `toml:"dkim_selectors"`
	// DNSBLZones are queried for the MX address and the egress addresses.
	DNSBLZones []string `toml:"dnsbl_zones"`
	// DNSWLZones are queried for the MX address.
	DNSWLZones []string `toml:"dnswl_zones"`
	// AuthSignals collects the domain's authentication signals (spec
	// §2.6) beside each SMTP probe. Default true.
	AuthSignals bool `toml:"auth_signals"`
	// DidYouMean suggests the address meant when a domain that takes no
	// mail is a typing slip of one that does: of the large providers
	// verifyd ships, or of the account's own domains (receipt
	// did_you_mean, the jobs' suggestions.csv). Default true.
	DidYouMean bool `toml:"did_you_mean"`
	// SessionReuse lets a real-time validation take the SMTP session an
	// earlier one to the same MX address kept open (RSET, then its own
	// transaction), instead of opening one of its own: up to 10
	// transactions and 5 refusals a session, kept 2 s unused
	// (probe/README.md, "Kept sessions"). Default true.
	SessionReuse bool `toml:"session_reuse"`
	// AuthConcurrency bounds the domains whose auth-signal lookups run at
	// once (a score of DNS lookups each); more wait their turn, real-time
	// validations ahead of batch work. Default 128.
	AuthConcurrency int `toml:"auth_concurrency"`
	// TrustKeys are the svc trust programme's issued key ids, each with the
	// highest level (1-5) a domain using it may claim; a domain whose
	// _svc-trust record names another key is not certified.
	TrustKeys map[string]int `toml:"trust_keys"`
	// RDAPServers and WHOISServers override the registration-age sources
	// per TLD ("com" → "https://rdap.example/", "test" → "127.0.0.1:4343").
	// Default: the RDAP bootstrap shipped with verifyd (RFC 9224).
	RDAPServers  map[string]string `toml:"rdap_servers"`
	WHOISServers map[string]string `toml:"whois_servers"`
	// RegistryAllowPrivate lets RDAP and WHOIS reach loopback and private
	// addresses (the simulated world, tests). Default false.
	RegistryAllowPrivate bool `toml:"registry_allow_private"`
}

// Limits are the request limits of spec §8.
type Limits struct {
	// BatchMaxEmails caps the addresses of one batch. Default 100000.
	BatchMaxEmails int `toml:"batch_max_emails"`
	// BatchMaxBodyBytes caps the body of POST /v1/batch. Default 8 MiB.
	BatchMaxBodyBytes int `toml:"batch_max_body_bytes"`
	// MaxBodyBytes caps the body of every other request. Default 64 KiB.
	MaxBodyBytes int `toml:"max_body_bytes"`
	// CSVDownloads caps the results.csv downloads streaming at once, and
	// CSVDownloadsPerAccount those of one account; one over a cap answers
	// 429 with Retry-After. A download holds its place until it ends or
	// http.write_timeout cuts a client that stopped reading. Defaults 32
	// and 4.
	CSVDownloads           int `toml:"csv_downloads"`
	CSVDownloadsPerAccount int `toml:"csv_downloads_per_account"`
}

// RateLimits are the per source IP fixed one-minute windows of spec §8.
type RateLimits struct {
	// Window is the length of a window. Default 1m (spec); tests shorten it.
	Window time.Duration `toml:"window"`
	// Validate, Batch, Results and Other are requests per window.
	// Defaults 500, 30, 120, 300.
	Validate int `toml:"validate"`
	Batch    int `toml:"batch"`
	Results  int `toml:"results"`
	Other    int `toml:"other"`
	// Disabled turns the per-IP limits off (the per-plan limits still apply).
	Disabled bool `toml:"disabled"`
}

// Webhooks configures outgoing webhook deliveries.
type Webhooks struct {
	// Timeout bounds one delivery attempt. Default 10s.
	Timeout time.Duration `toml:"timeout"`
	// AllowPrivate allows delivery to loopback, private and link-local
	// addresses. Default false (SSRF guard).
	AllowPrivate bool `toml:"allow_private"`
	// RetrySchedule is the wait after each failed attempt; the last one
	// repeats. Default ["30s", "2m", "10m", "1h", "6h"] (spec §6).
	RetrySchedule []time.Duration `toml:"retry_schedule"`
	// GiveUpAfter is how long after an event was created a delivery that
	// still fails moves to the dead-letter queue. Default 24h (spec §6).
	GiveUpAfter time.Duration `toml:"give_up_after"`
	// Concurrency bounds the deliveries in flight. Default 16.
	Concurrency int `toml:"concurrency"`
}

// Jobs configures the batch scheduler (server/batch).
type Jobs struct {
	// RetryWindow is how long after its first greylisting an address of a
	// batch is retried; then its result is final (unknown). Default 30m.
	RetryWindow time.Duration `toml:"retry_window"`
	// Concurrency bounds the domain groups (engine calls) in flight, all
	// jobs together; more than probe.batch_workers only queue. Default
	// 1024.
	Concurrency int `toml:"concurrency"`
	// DomainConcurrency bounds the groups of one domain in flight, all jobs
	// together. Default 4.
	DomainConcurrency int `toml:"domain_concurrency"`
	// GroupSize is the most addresses of one engine call (one SMTP
	// session). Default 100.
	GroupSize int `toml:"group_size"`
	// GroupTimeout bounds one engine call. Default 10m.
	GroupTimeout time.Duration `toml:"group_timeout"`
	// MaxFailures consecutive failures of one engine call, or of a job's
	// result writes, fail the job (retried 1s, 2s, 4s … up to 1m apart).
	// Default 10.
	MaxFailures int `toml:"max_failures"`
}

// Outcomes configures delivery outcomes (server/outcomes,
// docs/outcomes.md).
type Outcomes struct {
	// Window: an outcome matches a verdict at most this old, and an
	// address's "no such mailbox" bounce makes its verdicts invalid this
	// long. Default 90 days.
	Window time.Duration `toml:"window"`
	// Retention: outcomes that happened longer ago are deleted. Default
	// 180 days.
	Retention time.Duration `toml:"retention"`
	// DomainTTL: a domain's counts of bounces and deliveries are kept this
	// long after their last change. Default 30 days.
	DomainTTL time.Duration `toml:"domain_ttl"`
	// MinBounces and BounceShare: a domain whose addresses verifyd called
	// valid or risky bounced at least min_bounces times as "no such
	// mailbox", at least bounce_share of its bounces and deliveries,
	// accepts at RCPT what it bounces later: its valid addresses are
	// risky (catch_all). Defaults 2 and 0.2.
	MinBounces  int     `toml:"min_bounces"`
	BounceShare float64 `toml:"bounce_share"`
	// SNSHosts are the hosts an SNS message's SigningCertURL and
	// SubscribeURL may name (/v1/outcomes/ses): "*" is one DNS label,
	// ":port" when not 443. Default ["sns.*.amazonaws.com"].
	SNSHosts []string `toml:"sns_hosts"`
	// SNSCAFile, when set, is a PEM file of the certificates SNS signing
	// certificates must chain to (its roots and intermediates); empty: the
	// system's roots.
	SNSCAFile string `toml:"sns_ca_file"`
	// DomainsRefresh is how often a box reads again the domains every box
	// learned bounce what they accept (in a fleet, the others' findings).
	// Default 1m.
	DomainsRefresh time.Duration `toml:"domains_refresh"`
	// RefitEvery is how often the score's calibration is fitted to each
	// account's outcomes. Default 24h.
	RefitEvery time.Duration `toml:"refit_every"`
	// CalibrationMinOutcomes: an account (or one provider's share of it)
	// gets a calibration of its own once it has this many delivered or
	// bounced outcomes matched to verdicts. Default 100.
	CalibrationMinOutcomes int `toml:"calibration_min_outcomes"`
}

// Defaults returns the configuration verifyd runs with when no file is given.
func Defaults() Config {
	dataDir := "./data"
	if d := firstDir(os.Getenv("STATE_DIRECTORY")); d != "" {
		dataDir = d
	}
	// Where a package has a default of its own, it is the one: the
	// numbers live once, in the package that uses them. The resolver's
	// timeout, minimum TTL and cache size, and the SMTP connect timeout,
	// are the daemon's own (the packages' defaults suit a library caller).
	return Config{
		DataDir:   dataDir,
		LogLevel:  "info",
		LogFormat: "auto",
		Storage: Storage{Backend: "pebble", Lease: postgres.DefaultLease, CallTimeout: postgres.DefaultCallTimeout, CreditLeases: true, ChargeGather: postgres.DefaultChargeGather,
			MinFreeBytes: pebble.DefaultMinFreeBytes},
		HTTP: HTTP{
			Listen:          "127.0.0.1:8080",
			HSTSMaxAge:      tlsserve.DefaultHSTSMaxAge,
			ACMEDirectory:   tlsserve.DefaultACMEDirectory,
			ReadTimeout:     30 * time.Second,
			WriteTimeout:    60 * time.Second,
			IdleTimeout:     2 * time.Minute,
			MaxHeaderBytes:  server.DefaultMaxHeaderBytes,
			RequestTimeout:  httpapi.DefaultRequestTimeout,
			ShutdownTimeout: 20 * time.Second,
			MaxConns:        8192,
			MaxConnsPerIP:   512,
			IPv6PrefixLen:   conns.DefaultIPv6PrefixLen,
			LingerTimeout:   conns.DefaultLingerTimeout,
			LingerBytes:     conns.DefaultLingerBytes,
		},
		Metrics: Metrics{Listen: "127.0.0.1:9464"},
		Resolver: Resolver{
			Timeout:        2 * time.Second,
			MinTTL:         30 * time.Second,
			MaxTTL:         resolver.DefaultMaxTTL,
			NegativeMaxTTL: resolver.DefaultNegativeMaxTTL,
			CacheEntries:   200000,
			MaxInFlight:    resolver.DefaultMaxInFlight,
			Prefetch:       true,
		},
		SMTP: SMTP{
			Port:            probe.DefaultSMTPPort,
			ConnectTimeout:  10 * time.Second,
			CommandTimeout:  probe.DefaultCommandTimeout,
			GreetingTimeout: probe.DefaultGreetingTimeout,
			MaxMXHosts:      probe.DefaultMaxMXHosts,
			SessionTimeout:  probe.DefaultSessionTimeout,
			StartTLS:        true,
		},
		Egress: Egress{
			AddressesDir:      "/run/verifyd-egress",
			MaxConnsPerHost:   egress.DefaultMaxConnsPerHost,
			MaxRatePerHost:    egress.DefaultMaxRatePerHost,
			GreylistCooldown:  egress.DefaultGreylistCooldown,
			MaxCooldown:       egress.DefaultMaxCooldown,
			SelfCheckInterval: 10 * time.Minute,
			SelfCheckEnforce:  true,
		},
		Probe: Probe{
			RealtimeBudget:   server.DefaultRealtimeBudget,
			RealtimeWorkers:  probe.DefaultRealtimeWorkers,
			BatchWorkers:     probe.DefaultBatchWorkers,
			BatchShare:       probe.DefaultBatchShare,
			BatchSchedTarget: probe.DefaultBatchSchedTarget,
			BatchQueueTarget: probe.DefaultBatchQueueTarget,
			CatchAllTTL:      probe.DefaultCatchAllTTL,
			ListsDir:         "/etc/verifyd/lists",
			CacheMaxAge:      server.DefaultCacheMaxAge,
			AuthSignals:      true,
			DidYouMean:       true,
			SessionReuse:     true,
			AuthConcurrency:  authsig.DefaultConcurrency,
		},
		Limits: Limits{
			BatchMaxEmails:         server.DefaultMaxEmails,
			BatchMaxBodyBytes:      server.DefaultMaxBodyBytes,
			MaxBodyBytes:           server.DefaultMaxSmallBody,
			CSVDownloads:           server.DefaultMaxDownloads,
			CSVDownloadsPerAccount: server.DefaultMaxDownloadsPerAccount,
		},
		RateLimits: RateLimits{
			Window:   time.Minute,
			Validate: 500,
			Batch:    30,
			Results:  120,
			Other:    300,
		},
		Webhooks: Webhooks{
			Timeout:       webhook.DefaultTimeout,
			RetrySchedule: slices.Clone(webhook.DefaultRetrySchedule),
			GiveUpAfter:   webhook.DefaultGiveUpAfter,
			Concurrency:   webhook.DefaultConcurrency,
		},
		Auth: Auth{
			Registration:      "closed",
			OpenPlan:          "free",
			SessionLifetime:   web.DefaultSessionLifetime,
			SessionIdle:       web.DefaultSessionIdle,
			InviteLifetime:    admin.DefaultInviteLifetime,
			SecureCookie:      "auto",
			LinkLimit:         web.DefaultLinkLimit.N,
			LinkWindow:        web.DefaultLinkLimit.Window,
			RegisterLimit:     web.DefaultRegisterLimit.N,
			RegisterWindow:    web.DefaultRegisterLimit.Window,
			LoginLimit:        web.DefaultLoginLimit.N,
			LoginWindow:       web.DefaultLoginLimit.Window,
			Argon2MemoryKiB:   int(web.DefaultArgon2.MemoryKiB),
			Argon2Iterations:  int(web.DefaultArgon2.Iterations),
			Argon2Parallelism: int(web.DefaultArgon2.Parallelism),
		},
		Outcomes: Outcomes{
			Window:                 90 * 24 * time.Hour,
			Retention:              180 * 24 * time.Hour,
			DomainTTL:              30 * 24 * time.Hour,
			MinBounces:             2,
			BounceShare:            0.2,
			RefitEvery:             24 * time.Hour,
			DomainsRefresh:         time.Minute,
			SNSHosts:               []string{"sns.*.amazonaws.com"},
			CalibrationMinOutcomes: 100,
		},
		Jobs: Jobs{
			RetryWindow:       batch.DefaultRetryWindow,
			Concurrency:       batch.DefaultConcurrency,
			DomainConcurrency: batch.DefaultDomainConcurrency,
			GroupSize:         batch.DefaultGroupSize,
			GroupTimeout:      batch.DefaultGroupTimeout,
			MaxFailures:       batch.DefaultMaxFailures,
		},
	}
}

// firstDir returns the first of the colon-separated directories systemd
// puts in $STATE_DIRECTORY and friends.
func firstDir(v string) string {
	d, _, _ := strings.Cut(v, ":")
	return d
}

// Derive fills the fields whose defaults depend on other fields (the admin
// socket on the data dir, MAIL FROM on the HELO name). Load calls it; call it
// after changing a Config by hand.
func (c *Config) Derive() {
	if c.Admin.Socket == "" {
		if d := firstDir(os.Getenv("RUNTIME_DIRECTORY")); d != "" {
			c.Admin.Socket = filepath.Join(d, "admin.sock")
		} else {
			c.Admin.Socket = filepath.Join(c.DataDir, "admin.sock")
		}
	}
}

// HostName is the HELO name of last resort: the host's name when it is a
// fully qualified one, else verifyd.localdomain.
func HostName() string {
	host, _ := os.Hostname()
	if host == "" || !strings.Contains(host, ".") || !IsHostName(host) {
		host = "verifyd.localdomain"
	}
	return host
}

// IsHostName reports whether s can be a HELO name: a domain name of
// letters, digits, hyphens and dots (RFC 5321 §4.1.2 Domain), 1 to 253
// characters, no empty label.
func IsHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Load reads the TOML file at path over the defaults, then validates. A key
// the file has but Config does not know is an error.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(string(b))
}

// Parse reads TOML text over the defaults, then validates.
func Parse(text string) (Config, error) {
	c := Defaults()
	md, err := toml.Decode(text, &c)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	var errs []error
	for _, k := range md.Undecoded() {
		errs = append(errs, fmt.Errorf("%s: unknown key", k.String()))
	}
	c.Derive()
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return c, nil
}

// Validate reports every problem of c at once; each line names the TOML key.
func (c *Config) Validate() error {
	var errs []error
	add := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	if c.DataDir == "" {
		add("data_dir", "must not be empty")
	}
	switch c.Storage.Backend {
	case "pebble":
	case "postgres":
		if c.Storage.DSN == "" && os.Getenv("VERIFYD_PG_DSN") == "" {
			add("storage.dsn", "must be set for the postgres backend (or VERIFYD_PG_DSN)")
		}
	default:
		add("storage.backend", "must be pebble or postgres, not %q", c.Storage.Backend)
	}
	if c.Storage.MinFreeBytes < 0 {
		add("storage.min_free_bytes", "must not be negative, not %d", c.Storage.MinFreeBytes)
	}
	if c.Storage.ChargeGather < 0 || c.Storage.ChargeGather > 100*time.Millisecond {
		add("storage.charge_gather", "must be 0s to 100ms, not %s", c.Storage.ChargeGather)
	}
	if c.Storage.CallTimeout < time.Second || c.Storage.CallTimeout > 10*time.Minute {
		add("storage.call_timeout", "must be 1s to 10m, not %s", c.Storage.CallTimeout)
	}
	if c.Storage.Lease < 3*time.Second {
		add("storage.lease", "must be at least 3s, not %s", c.Storage.Lease)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		add("log_level", "must be debug, info, warn or error, not %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "auto", "json", "text":
	default:
		add("log_format", "must be auto, json or text, not %q", c.LogFormat)
	}
	checkHostPort := func(key, v string, optional bool) {
		if v == "" {
			if !optional {
				add(key, "must not be empty")
			}
			return
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			add(key, "%q is not host:port", v)
		}
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			add(key, "must be a positive duration, not %s", d)
		}
	}
	atLeast := func(key string, v, min int) {
		if v < min {
			add(key, "must be at least %d, not %d", min, v)
		}
	}

	checkHostPort("http.listen", c.HTTP.Listen, false)
	if (c.HTTP.TLSCert == "") != (c.HTTP.TLSKey == "") {
		// The files themselves are read by verifyd (and -check-config)
		// when it starts, not here: a config is checked where they may
		// not be.
		add("http.tls_cert", "and http.tls_key go together: set both or neither")
	}
	if len(c.HTTP.ACMEHosts) > 0 {
		if c.HTTP.TLSCert != "" {
			add("http.acme_hosts", "or http.tls_cert and http.tls_key: one source of certificates, not both")
		}
		for i, h := range c.HTTP.ACMEHosts {
			if _, err := netip.ParseAddr(h); err == nil || !IsHostName(h) || !strings.Contains(h, ".") {
				add(fmt.Sprintf("http.acme_hosts[%d]", i), "must be a host name with a dot (a certificate is ordered for it), not %q", h)
			}
		}
		if c.HTTP.ACMEDirectory != "" {
			if u, err := url.Parse(c.HTTP.ACMEDirectory); err != nil || u.Scheme != "https" || u.Host == "" {
				add("http.acme_directory", "must be an https:// URL, not %q", c.HTTP.ACMEDirectory)
			}
		}
	} else if c.HTTP.ACMEEmail != "" || c.HTTP.ACMECAFile != "" {
		add("http.acme_hosts", "is needed by http.acme_email and acme_ca_file")
	}
	if c.HTTP.RedirectListen != "" {
		checkHostPort("http.redirect_listen", c.HTTP.RedirectListen, false)
		if !c.HTTP.TLS() {
			add("http.redirect_listen", "needs TLS (http.tls_cert and http.tls_key, or http.acme_hosts): it sends every request to HTTPS")
		}
	}
	if c.HTTP.HSTSMaxAge < 0 {
		add("http.hsts_max_age", "must be 0 (none) or positive, not %v", c.HTTP.HSTSMaxAge)
	}
	for i, p := range c.HTTP.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				add(fmt.Sprintf("http.trusted_proxies[%d]", i), "%q is neither an address nor a CIDR prefix", p)
			}
		}
	}
	positive("http.read_timeout", c.HTTP.ReadTimeout)
	positive("http.write_timeout", c.HTTP.WriteTimeout)
	positive("http.idle_timeout", c.HTTP.IdleTimeout)
	positive("http.shutdown_timeout", c.HTTP.ShutdownTimeout)
	positive("http.request_timeout", c.HTTP.RequestTimeout)
	if c.HTTP.RequestTimeout > 0 && c.HTTP.RequestTimeout <= c.Probe.RealtimeBudget {
		add("http.request_timeout", "must exceed probe.realtime_budget (%v), not %v: a validation needs its budget and its storage calls", c.Probe.RealtimeBudget, c.HTTP.RequestTimeout)
	}
	positive("http.linger_timeout", c.HTTP.LingerTimeout)
	if c.HTTP.MaxConns < 0 {
		add("http.max_conns", "must be 0 (no cap) or positive, not %d", c.HTTP.MaxConns)
	}
	if c.HTTP.MaxConnsPerIP < 0 {
		add("http.max_conns_per_ip", "must be 0 (no cap) or positive, not %d", c.HTTP.MaxConnsPerIP)
	}
	if c.HTTP.LingerBytes <= 0 {
		add("http.linger_bytes", "must be positive, not %d", c.HTTP.LingerBytes)
	}
	if c.HTTP.MaxHeaderBytes < 4<<10 || c.HTTP.MaxHeaderBytes > 1<<20 {
		add("http.max_header_bytes", "must be 4096 to 1048576, not %d", c.HTTP.MaxHeaderBytes)
	}
	if c.HTTP.IPv6PrefixLen < 1 || c.HTTP.IPv6PrefixLen > 128 {
		add("http.ipv6_prefix_len", "must be 1 to 128, not %d", c.HTTP.IPv6PrefixLen)
	}

	if c.Admin.Socket == "" {
		add("admin.socket", "must not be empty")
	}
	checkHostPort("metrics.listen", c.Metrics.Listen, true)
	if c.Metrics.Pprof && c.Metrics.Listen == "" {
		add("metrics.pprof", "needs metrics.listen")
	}

	for i, u := range c.Resolver.Upstreams {
		if _, err := netip.ParseAddrPort(u); err != nil {
			add(fmt.Sprintf("resolver.upstreams[%d]", i), "%q is not ip:port", u)
		}
	}
	positive("resolver.timeout", c.Resolver.Timeout)
	if c.Resolver.MinTTL < 0 {
		add("resolver.min_ttl", "must not be negative")
	}
	if c.Resolver.MaxTTL < c.Resolver.MinTTL {
		add("resolver.max_ttl", "must be at least resolver.min_ttl (%s), not %s", c.Resolver.MinTTL, c.Resolver.MaxTTL)
	}
	if c.Resolver.NegativeMaxTTL < 0 {
		add("resolver.negative_max_ttl", "must not be negative")
	}
	atLeast("resolver.cache_entries", c.Resolver.CacheEntries, 1)
	atLeast("resolver.max_inflight", c.Resolver.MaxInFlight, 1)

	if c.SMTP.Port < 1 || c.SMTP.Port > 65535 {
		add("smtp.port", "must be 1-65535, not %d", c.SMTP.Port)
	}
	if c.SMTP.HeloName != "" && !IsHostName(c.SMTP.HeloName) {
		add("smtp.helo_name", "must be a host name, not %q", c.SMTP.HeloName)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Egress.HeloNames)) {
		v := c.Egress.HeloNames[k]
		key := fmt.Sprintf("egress.helo_names[%q]", k)
		if a, err := netip.ParseAddr(k); err != nil || a.Zone() != "" {
			add(key, "%q is not an IP address", k)
		}
		if !IsHostName(v) {
			add(key, "must be a host name, not %q", v)
		}
	}
	if c.SMTP.MailFrom != "" && (!strings.Contains(c.SMTP.MailFrom, "@") || strings.ContainsAny(c.SMTP.MailFrom, " <>\r\n")) {
		add("smtp.mail_from", "must be an address like verify@example.com, not %q", c.SMTP.MailFrom)
	}
	positive("smtp.connect_timeout", c.SMTP.ConnectTimeout)
	positive("smtp.command_timeout", c.SMTP.CommandTimeout)
	positive("smtp.session_timeout", c.SMTP.SessionTimeout)
	positive("smtp.greeting_timeout", c.SMTP.GreetingTimeout)
	if c.SMTP.MaxMXHosts < 1 || c.SMTP.MaxMXHosts > 100 {
		add("smtp.max_mx_hosts", "must be 1 to 100, not %d", c.SMTP.MaxMXHosts)
	}

	seen := map[netip.Addr]bool{}
	for i, a := range c.Egress.Addresses {
		ip, err := netip.ParseAddr(a)
		key := fmt.Sprintf("egress.addresses[%d]", i)
		switch {
		case err != nil:
			add(key, "%q is not an IP address", a)
		case seen[ip]:
			add(key, "%s is listed twice", ip)
		}
		seen[ip] = true
	}
	if d := c.Egress.AddressesDir; d != "" && !filepath.IsAbs(d) {
		add("egress.addresses_dir", "must be an absolute path, not %q", d)
	}
	atLeast("egress.max_conns_per_host", c.Egress.MaxConnsPerHost, 1)
	if c.Egress.MaxRatePerHost <= 0 {
		add("egress.max_rate_per_host", "must be positive, not %v", c.Egress.MaxRatePerHost)
	}
	positive("egress.greylist_cooldown", c.Egress.GreylistCooldown)
	if c.Egress.MaxCooldown < c.Egress.GreylistCooldown {
		add("egress.max_cooldown", "must be at least egress.greylist_cooldown (%s), not %s", c.Egress.GreylistCooldown, c.Egress.MaxCooldown)
	}

	if c.Egress.SelfCheckInterval < 0 {
		add("egress.self_check_interval", "must not be negative")
	}
	positive("probe.realtime_budget", c.Probe.RealtimeBudget)
	atLeast("probe.realtime_workers", c.Probe.RealtimeWorkers, 1)
	if c.Probe.BatchShare < -1 || c.Probe.BatchShare == 0 {
		add("probe.batch_share", "must be -1 (no limit) or at least 1, not %d", c.Probe.BatchShare)
	}
	atLeast("probe.batch_workers", c.Probe.BatchWorkers, 1)
	for k, d := range map[string]time.Duration{"probe.batch_sched_target": c.Probe.BatchSchedTarget, "probe.batch_queue_target": c.Probe.BatchQueueTarget} {
		if d == 0 || (d < 0 && d != -time.Second) {
			add(k, "must be a positive duration, or -1s (not a signal), not %s", d)
		}
	}
	positive("probe.catch_all_ttl", c.Probe.CatchAllTTL)
	positive("probe.cache_max_age", c.Probe.CacheMaxAge)
	atLeast("probe.auth_concurrency", c.Probe.AuthConcurrency, 1)
	for k, lvl := range c.Probe.TrustKeys {
		if lvl < 1 || lvl > 5 {
			add("probe.trust_keys."+k, "level must be 1-5, not %d", lvl)
		}
	}

	atLeast("limits.batch_max_emails", c.Limits.BatchMaxEmails, 1)
	atLeast("limits.batch_max_body_bytes", c.Limits.BatchMaxBodyBytes, 1024)
	atLeast("limits.csv_downloads", c.Limits.CSVDownloads, 1)
	atLeast("limits.csv_downloads_per_account", c.Limits.CSVDownloadsPerAccount, 1)
	atLeast("limits.max_body_bytes", c.Limits.MaxBodyBytes, 1024)

	positive("rate_limits.window", c.RateLimits.Window)
	atLeast("rate_limits.validate", c.RateLimits.Validate, 1)
	atLeast("rate_limits.batch", c.RateLimits.Batch, 1)
	atLeast("rate_limits.results", c.RateLimits.Results, 1)
	atLeast("rate_limits.other", c.RateLimits.Other, 1)

	positive("webhooks.timeout", c.Webhooks.Timeout)
	if len(c.Webhooks.RetrySchedule) == 0 {
		add("webhooks.retry_schedule", "must list at least one delay")
	}
	for i, d := range c.Webhooks.RetrySchedule {
		positive(fmt.Sprintf("webhooks.retry_schedule[%d]", i), d)
	}
	positive("webhooks.give_up_after", c.Webhooks.GiveUpAfter)
	atLeast("webhooks.concurrency", c.Webhooks.Concurrency, 1)

	positive("outcomes.window", c.Outcomes.Window)
	positive("outcomes.retention", c.Outcomes.Retention)
	positive("outcomes.domain_ttl", c.Outcomes.DomainTTL)
	atLeast("outcomes.min_bounces", c.Outcomes.MinBounces, 1)
	positive("outcomes.refit_every", c.Outcomes.RefitEvery)
	positive("outcomes.domains_refresh", c.Outcomes.DomainsRefresh)
	atLeast("outcomes.calibration_min_outcomes", c.Outcomes.CalibrationMinOutcomes, 1)
	if b := c.Outcomes.BounceShare; b <= 0 || b > 1 {
		add("outcomes.bounce_share", "must be more than 0 and at most 1, not %v", b)
	}
	if c.Outcomes.Retention < c.Outcomes.Window {
		add("outcomes.retention", "must be at least outcomes.window (%s), not %s: an address's bounce is evidence for the window", c.Outcomes.Window, c.Outcomes.Retention)
	}
	positive("jobs.retry_window", c.Jobs.RetryWindow)
	atLeast("jobs.concurrency", c.Jobs.Concurrency, 1)
	atLeast("jobs.domain_concurrency", c.Jobs.DomainConcurrency, 1)
	atLeast("jobs.group_size", c.Jobs.GroupSize, 1)
	positive("jobs.group_timeout", c.Jobs.GroupTimeout)
	atLeast("jobs.max_failures", c.Jobs.MaxFailures, 1)

	switch c.Auth.Registration {
	case "closed", "invite", "open":
	default:
		add("auth.registration", "must be closed, invite or open, not %q", c.Auth.Registration)
	}
	switch c.Auth.OpenPlan {
	case "free", "starter", "growth", "scale", "enterprise":
	default:
		add("auth.open_plan", "must be free, starter, growth, scale or enterprise, not %q", c.Auth.OpenPlan)
	}
	if c.Auth.OpenCredits < 0 {
		add("auth.open_credits", "must not be negative, not %d", c.Auth.OpenCredits)
	}
	positive("auth.session_lifetime", c.Auth.SessionLifetime)
	positive("auth.session_idle", c.Auth.SessionIdle)
	positive("auth.invite_lifetime", c.Auth.InviteLifetime)
	switch c.Auth.SecureCookie {
	case "auto", "always", "never":
	default:
		add("auth.secure_cookie", "must be auto, always or never, not %q", c.Auth.SecureCookie)
	}
	atLeast("auth.link_limit", c.Auth.LinkLimit, 1)
	positive("auth.link_window", c.Auth.LinkWindow)
	atLeast("auth.register_limit", c.Auth.RegisterLimit, 1)
	positive("auth.register_window", c.Auth.RegisterWindow)
	atLeast("auth.login_limit", c.Auth.LoginLimit, 1)
	positive("auth.login_window", c.Auth.LoginWindow)
	atLeast("auth.argon2_iterations", c.Auth.Argon2Iterations, 1)
	atLeast("auth.argon2_parallelism", c.Auth.Argon2Parallelism, 1)
	if c.Auth.Argon2Parallelism > 255 {
		add("auth.argon2_parallelism", "must be at most 255, not %d", c.Auth.Argon2Parallelism)
	}
	if c.Auth.Argon2MemoryKiB < 8*max(c.Auth.Argon2Parallelism, 1) || c.Auth.Argon2MemoryKiB > 4<<20 {
		add("auth.argon2_memory_kib", "must be between 8 per lane and 4194304 (4 GiB), not %d", c.Auth.Argon2MemoryKiB)
	}
	return errors.Join(errs...)
}

// TOML returns c as TOML text (for -print-config).
func (c *Config) TOML() (string, error) {
	shown := *c
	shown.Storage.DSN = RedactDSN(c.Storage.DSN)
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(&shown); err != nil {
		return "", err
	}
	return b.String(), nil
}

// RedactDSN is dsn with its password, if any, replaced by "xxxxx":
// printed configurations and logs never show it. Both DSN forms are
// handled: a URL (postgres://user:secret@host/db?password=secret) and
// key=value pairs (password=secret).
func RedactDSN(dsn string) string {
	if dsn == "" {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			fields[i] = k + "=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}
