package receipt

import (
	"encoding/json"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/storage"
)

// Receipt is the signed receipt of spec §2.4. Every field is required;
// kid is set and sig added by the signer (KeySet.SignStruct), which signs
// the RFC 8785 form of everything else. Optional keys of checks without a
// value are omitted, not null (DESIGN.md).
type Receipt struct {
	Email            string `json:"email"`
	Status           string `json:"status"`
	Score            int    `json:"score"`
	Checks           Checks `json:"checks"`
	ProbedAt         string `json:"probed_at"`
	LatencyMs        int64  `json:"latency_ms"`
	Kid              string `json:"kid,omitempty"`
	CreditsRemaining int64  `json:"credits_remaining"`
	Cached           bool   `json:"cached"`
	// Learned is present only when delivery outcomes changed the verdict
	// the probe reached (docs/outcomes.md); an additive field.
	Learned *Learned `json:"learned,omitempty"`
	// Calibration is present only when score is calibrated on the
	// account's delivery outcomes (docs/outcomes.md); an additive field.
	Calibration *Calibration `json:"calibration,omitempty"`
	// DidYouMean is present only when the address looks mistyped: its
	// domain takes no mail and is a typing slip of a mailbox domain that
	// does, or stray dots broke a large provider's local part
	// (probe.Result.DidYouMean); an additive field. The verdict is the
	// typed address's.
	DidYouMean *DidYouMean `json:"did_you_mean,omitempty"`
}

// DidYouMean is the receipt's suggestion: the address probably meant,
// and why (DidYouMeanDomain, DidYouMeanTLD, DidYouMeanLocal).
type DidYouMean struct {
	Email  string `json:"email"`
	Reason string `json:"reason"`
}

// The reasons of a suggestion.
const (
	// DidYouMeanDomain: the domain's name slipped (gmial.com), and maybe
	// its top-level part too (hotmial.co).
	DidYouMeanDomain = "domain_typo"
	// DidYouMeanTLD: only the top-level part slipped (gmail.con).
	DidYouMeanTLD = "tld_typo"
	// DidYouMeanLocal: only stray dots in the local part of a large
	// provider's address (ann.@gmail.com, ann..lee@outlook.com).
	DidYouMeanLocal = "local_part_typo"
)

// DidYouMeanOf is the receipt's form of d; nil for nil.
func DidYouMeanOf(d *probe.DidYouMean) *DidYouMean {
	if d == nil {
		return nil
	}
	reason := DidYouMeanDomain
	switch {
	case d.Slip != "":
	case d.TLD:
		reason = DidYouMeanTLD
	case d.Local:
		reason = DidYouMeanLocal
	}
	return &DidYouMean{Email: d.Email, Reason: reason}
}

// Calibration is the receipt's account of a calibrated score.
type Calibration struct {
	Model    string `json:"model"`
	Outcomes int    `json:"outcomes"`
	RawScore int    `json:"raw_score"`
}

// Learned is the receipt's account of what delivery outcomes taught
// (probe.Learned).
type Learned struct {
	Kind string `json:"kind"`
	// Was is the verdict the probe reached.
	Was string `json:"was"`
	// At and EnhancedCode name the address's bounce (address_bounced).
	At           string `json:"at,omitempty"`
	EnhancedCode string `json:"enhanced_code,omitempty"`
	// Bounced and Delivered are the domain's counts (domain_bounces).
	Bounced   int `json:"bounced,omitempty"`
	Delivered int `json:"delivered,omitempty"`
}

// Learn changes a receipt's verdict by l, as probe.Result.Learn changes
// a result's.
func Learn(rec *Receipt, l *probe.Learned) {
	l.Was = probe.Status(rec.Status)
	status, reason, score, catchAll := l.Verdict(rec.Score)
	rec.Status, rec.Checks.Reason, rec.Score = string(status), string(reason), score
	rec.Checks.IsCatchAll = rec.Checks.IsCatchAll || catchAll
	rec.Learned = LearnedOf(l)
}

// LearnedOf is the receipt's form of l; nil for nil.
func LearnedOf(l *probe.Learned) *Learned {
	if l == nil {
		return nil
	}
	out := &Learned{Kind: l.Kind, Was: string(l.Was), EnhancedCode: l.Enhanced, Bounced: l.Bounced, Delivered: l.Delivered}
	if !l.At.IsZero() {
		out.At = FormatTime(l.At)
	}
	return out
}

// Checks is spec §2.5's checks object.
type Checks struct {
	Reason         string `json:"reason,omitempty"`
	Syntax         bool   `json:"syntax"`
	MX             bool   `json:"mx"`
	Domain         string `json:"domain,omitempty"`
	MXHost         string `json:"mx_host,omitempty"`
	IsDisposable   bool   `json:"is_disposable"`
	IsRoleBased    bool   `json:"is_role_based"`
	IsFreeProvider bool   `json:"is_free_provider"`
	IsCatchAll     bool   `json:"is_catch_all"`
	// Flat copies of auth keys (spec §2.5).
	SPF          string `json:"spf,omitempty"`
	DKIM         string `json:"dkim,omitempty"`
	DMARC        string `json:"dmarc,omitempty"`
	MTASTS       *bool  `json:"mta_sts,omitempty"`
	SVCCertified *bool  `json:"svc_certified,omitempty"`
	// Auth is spec §2.6's object; {} when nothing was learnt.
	Auth json.RawMessage `json:"auth"`
}

// TimeFormat is ISO 8601 UTC with milliseconds (spec §2.4), the form of
// every time the API answers.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime writes t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Of builds the receipt of an engine result (without credits, kid and
// sig, which the charge adds).
func Of(r *probe.Result) *Receipt {
	status, score := verdict(r)
	rec := &Receipt{
		Email:     r.Email,
		Status:    status,
		Score:     score,
		ProbedAt:  FormatTime(r.ProbedAt),
		LatencyMs: r.Latency.Milliseconds(),
		Checks: Checks{
			Reason:         string(r.Reason),
			Syntax:         r.Checks.Syntax,
			MX:             r.Checks.MX,
			Domain:         r.Checks.Domain,
			MXHost:         r.Checks.MXHost,
			IsDisposable:   r.Checks.IsDisposable,
			IsRoleBased:    r.Checks.IsRoleBased,
			IsFreeProvider: r.Checks.IsFreeProvider,
			IsCatchAll:     r.Checks.IsCatchAll,
			Auth:           json.RawMessage("{}"),
		},
	}
	addAuth(rec, r)
	rec.Learned = LearnedOf(r.Learned)
	rec.DidYouMean = DidYouMeanOf(r.DidYouMean)
	if c := r.Calibration; c != nil {
		rec.Calibration = &Calibration{Model: c.Model, Outcomes: c.Outcomes, RawScore: c.RawScore}
	}
	return rec
}

// Unsigned is the receipt of an engine result as stored for later
// reuse (a batch result that a validation with cache: true may serve): the
// same shape as a signed receipt, without kid, sig and credits, which the
// serving request adds when it signs. fallbackEmail names the address when
// the result has none.
func Unsigned(r *probe.Result, fallbackEmail string) ([]byte, error) {
	rec := Of(r)
	if rec.Email == "" {
		rec.Email = fallbackEmail
	}
	return json.Marshal(rec)
}

// addAuth fills the auth object (spec §2.6) and its flat copies in checks
// (spec §2.5) from the engine's authentication signals. Signals the engine
// could not learn are left out, never guessed; without signals (no SMTP
// probe was made, or signals are off) auth is {}.
func addAuth(rec *Receipt, r *probe.Result) {
	if r.Auth == nil {
		return
	}
	b, err := json.Marshal(r.Auth)
	if err != nil {
		return
	}
	rec.Checks.Auth = b
	f := r.AuthFlat()
	rec.Checks.SPF, rec.Checks.DKIM, rec.Checks.DMARC = f.SPF, f.DKIM, f.DMARC
	rec.Checks.MTASTS, rec.Checks.SVCCertified = f.MTASTS, f.SVCCertified
}

// Stored is the record an engine result of the address email is kept as:
// the history row, the cache entry, the CSV row. It is the one mapping
// from the engine's result to storage, for single validations and batch
// jobs alike: the score clamped to 0-100, an empty status read as
// unknown, and an unknown verdict never served from the cache. Receipt is
// left for the caller: the signed one of a validation, Unsigned for a
// batch result.
func Stored(email string, r *probe.Result) storage.Result {
	status, score := verdict(r)
	return storage.Result{
		Email:     email,
		Status:    status,
		Score:     score,
		Reason:    string(r.Reason),
		LatencyMs: r.Latency.Milliseconds(),
		ProbedAt:  r.ProbedAt,
		// An unknown verdict is not worth serving from the cache.
		SkipCache: status == string(probe.StatusUnknown),
	}
}

// verdict is the status and score a result is signed and stored with,
// the same in the receipt and the record: an empty status is unknown,
// the score 0 to 100.
func verdict(r *probe.Result) (string, int) {
	status := r.Status
	if status == "" {
		status = probe.StatusUnknown
	}
	return string(status), min(max(r.Score, 0), 100)
}
