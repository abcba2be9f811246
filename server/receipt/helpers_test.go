package receipt

import (
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// testReceipt mirrors spec §2.4-2.6: what the server will sign.
type testReceipt struct {
	Email            string      `json:"email"`
	Status           string      `json:"status"`
	Score            int         `json:"score"`
	Checks           testChecks  `json:"checks"`
	ProbedAt         string      `json:"probed_at"`
	LatencyMS        int         `json:"latency_ms"`
	Kid              string      `json:"kid"`
	Sig              string      `json:"sig,omitempty"`
	CreditsRemaining int         `json:"credits_remaining"`
	Cached           bool        `json:"cached"`
	Extra            *testNested `json:"extra,omitempty"`
}

type testChecks struct {
	Reason         string   `json:"reason,omitempty"`
	Syntax         bool     `json:"syntax"`
	MX             bool     `json:"mx"`
	Domain         string   `json:"domain,omitempty"`
	MXHost         string   `json:"mx_host,omitempty"`
	IsDisposable   bool     `json:"is_disposable"`
	IsRoleBased    bool     `json:"is_role_based"`
	IsFreeProvider bool     `json:"is_free_provider"`
	IsCatchAll     bool     `json:"is_catch_all"`
	SPF            string   `json:"spf,omitempty"`
	DKIM           string   `json:"dkim,omitempty"`
	DMARC          string   `json:"dmarc,omitempty"`
	MTASTS         *bool    `json:"mta_sts,omitempty"`
	SvcCertified   *bool    `json:"svc_certified,omitempty"`
	Auth           testAuth `json:"auth"`
}

type testAuth struct {
	SPF                  string   `json:"spf,omitempty"`
	DKIM                 string   `json:"dkim,omitempty"`
	DMARC                string   `json:"dmarc,omitempty"`
	DMARCPolicy          string   `json:"dmarc_policy,omitempty"`
	SvcCertified         *bool    `json:"svc_certified,omitempty"`
	SvcTrustLevel        *int     `json:"svc_trust_level,omitempty"`
	SvcKeyID             string   `json:"svc_key_id,omitempty"`
	MTASTS               *bool    `json:"mta_sts,omitempty"`
	TLSRPT               *bool    `json:"tls_rpt,omitempty"`
	DANE                 *bool    `json:"dane,omitempty"`
	DNSSEC               *bool    `json:"dnssec,omitempty"`
	BIMI                 *bool    `json:"bimi,omitempty"`
	BIMIVMC              *bool    `json:"bimi_vmc,omitempty"`
	CAA                  *bool    `json:"caa,omitempty"`
	FCrDNS               *bool    `json:"fcrdns,omitempty"`
	PTR                  string   `json:"ptr,omitempty"`
	DMARCSubdomainPolicy string   `json:"dmarc_subdomain_policy,omitempty"`
	DMARCAlignmentSPF    string   `json:"dmarc_alignment_spf,omitempty"`
	DMARCAlignmentDKIM   string   `json:"dmarc_alignment_dkim,omitempty"`
	DMARCRUASet          *bool    `json:"dmarc_rua_set,omitempty"`
	TLSVersion           string   `json:"tls_version,omitempty"`
	TLSCipher            string   `json:"tls_cipher,omitempty"`
	AbuseMailbox         *bool    `json:"abuse_mailbox,omitempty"`
	PostmasterMailbox    *bool    `json:"postmaster_mailbox,omitempty"`
	HELOMatchesRDNS      *bool    `json:"helo_matches_rdns,omitempty"`
	DNSBLClean           *bool    `json:"dnsbl_clean,omitempty"`
	DNSBLListsOn         []string `json:"dnsbl_lists_on,omitempty"`
	DNSWLListed          *bool    `json:"dnswl_listed,omitempty"`
	DomainAgeDays        *int     `json:"domain_age_days,omitempty"`
}

// testNested is not part of the spec's receipt: it makes the receipts of
// the interoperability tests carry nested objects, arrays, nulls, floats
// and names that sort differently in UTF-16 and UTF-8.
type testNested struct {
	Names  map[string]any `json:"names"`
	List   []any          `json:"list"`
	Nothin *int           `json:"nothing"`
}

func ptr[T any](v T) *T { return &v }

// realisticReceipt is a full receipt of the spec's shape: 53 members in
// three objects, 1,096 bytes of JSON before signing.
func realisticReceipt() testReceipt {
	t, f := ptr(true), ptr(false)
	return testReceipt{
		Email:    "jane.doe+news@example.com",
		Status:   "valid",
		Score:    97,
		ProbedAt: "2026-03-14T09:26:53.589Z",
		Checks: testChecks{
			Reason: "ok", Syntax: true, MX: true,
			Domain: "example.com", MXHost: "mx1.example.com",
			IsFreeProvider: true,
			SPF:            "strict", DKIM: "found", DMARC: "found",
			MTASTS: t, SvcCertified: f,
			Auth: testAuth{
				SPF: "strict", DKIM: "found", DMARC: "found", DMARCPolicy: "reject",
				SvcCertified: f, SvcTrustLevel: ptr(2), SvcKeyID: "k-2026-01",
				MTASTS: t, TLSRPT: t, DANE: f, DNSSEC: t, BIMI: f, BIMIVMC: f, CAA: t, FCrDNS: t,
				PTR:                  "mx1.example.com",
				DMARCSubdomainPolicy: "quarantine", DMARCAlignmentSPF: "r", DMARCAlignmentDKIM: "s",
				DMARCRUASet: t, TLSVersion: "TLS1.3", TLSCipher: "TLS_AES_128_GCM_SHA256",
				AbuseMailbox: t, PostmasterMailbox: t, HELOMatchesRDNS: t,
				DNSBLClean: f, DNSBLListsOn: []string{"zen.spamhaus.org", "b.barracudacentral.org"},
				DNSWLListed: f, DomainAgeDays: ptr(9131),
			},
		},
		LatencyMS:        412,
		Kid:              "",
		CreditsRemaining: 4821,
		Cached:           false,
	}
}

func realisticReceiptJSON() []byte {
	b, err := json.Marshal(realisticReceipt())
	if err != nil {
		panic(err)
	}
	return b
}

// memStore is a KeyStore in memory that can be told to fail.
type memStore struct {
	mu    sync.Mutex
	data  []byte
	saves int
	fail  bool
}

func (m *memStore) LoadKeys() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.data...), nil
}

func (m *memStore) SaveKeys(b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errors.New("disk full")
	}
	m.data = append([]byte(nil), b...)
	m.saves++
	return nil
}

// countingReader yields deterministic bytes: 0, 1, 2, …
type countingReader struct{ n byte }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.n
		r.n++
	}
	return len(p), nil
}

var _ io.Reader = (*countingReader)(nil)
