package contract

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The enumerations of §2.3, copied from the specification's table.
var (
	// §2.3 "status (verdict, ValidationStatus)"
	verdicts = []string{"valid", "invalid", "risky", "unknown", "disposable", "spamtrap"}
	// §2.3 "checks.reason"
	reasons = []string{"ok", "syntax_error", "domain_not_found", "no_mx_record", "smtp_rejected",
		"mailbox_not_found", "catch_all", "role_based", "disposable_domain", "timeout", "connection_error"}
	// §2.3 "job status"
	jobStatuses = []string{"queued", "running", "completed", "failed"}
	// §2.3 "result kind (field kind of a history row)"
	resultKinds = []string{"single", "batch"}
	// §2.3 "error code"
	errorCodes = []string{"BAD_REQUEST", "UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND", "CONFLICT", "RATE_LIMITED", "INTERNAL"}
)

// statusOf is §7's table: the HTTP status of each code.
var statusOf = map[string]int{
	"BAD_REQUEST":  400,
	"UNAUTHORIZED": 401,
	"FORBIDDEN":    403,
	"NOT_FOUND":    404,
	"CONFLICT":     409,
	"RATE_LIMITED": 429,
	"INTERNAL":     500,
}

// isoMillisUTC is "ISO 8601 UTC with milliseconds" (§2.4 probed_at).
var isoMillisUTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// uuidRE is a UUID in its canonical text form (RFC 9562 §4).
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// parseDateTime reads an ISO 8601 date-time with an offset (RFC 3339, the
// profile of ISO 8601 that JSON APIs use).
func parseDateTime(v any) (time.Time, bool) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// asInt is v as an integer: a JSON number with an integral value.
func asInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// mustInt is asInt or a failure naming what.
func mustInt(t testing.TB, v any, what string) int64 {
	t.Helper()
	i, ok := asInt(v)
	if !ok {
		t.Fatalf("%s is %v (%T), not an integer", what, v, v)
	}
	return i
}

// obj is v as a JSON object, or nil.
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// fieldKind is the expected type of a field: what the specification's
// "Type" column says.
type fieldKind int

const (
	kString fieldKind = iota
	kBool
	kInt
	kObject
	kArrayOfString
	kDateTime
	kStringOrNull
	kDateTimeOrNull
	kIntOrNull
	kUUID
	kUUIDOrNull
)

func (k fieldKind) String() string {
	return [...]string{"string", "boolean", "integer", "object", "array of string", "date-time",
		"string or null", "date-time or null", "integer or null", "UUID", "UUID or null"}[k]
}

// hasKind says whether v is of kind k.
func hasKind(v any, k fieldKind) bool {
	switch k {
	case kString:
		_, ok := v.(string)
		return ok
	case kBool:
		_, ok := v.(bool)
		return ok
	case kInt:
		_, ok := asInt(v)
		return ok
	case kObject:
		_, ok := v.(map[string]any)
		return ok
	case kArrayOfString:
		a, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range a {
			if _, ok := e.(string); !ok {
				return false
			}
		}
		return true
	case kDateTime:
		_, ok := parseDateTime(v)
		return ok
	case kStringOrNull:
		return v == nil || hasKind(v, kString)
	case kDateTimeOrNull:
		return v == nil || hasKind(v, kDateTime)
	case kIntOrNull:
		return v == nil || hasKind(v, kInt)
	case kUUID:
		s, ok := v.(string)
		return ok && uuidRE.MatchString(s)
	case kUUIDOrNull:
		return v == nil || hasKind(v, kUUID)
	}
	return false
}

// checkFields reports each field of want that m lacks or holds with
// another type; with exact, also each member of m that want does not list.
func checkFields(m map[string]any, want map[string]fieldKind, exact bool) []string {
	var bad []string
	for k, kind := range want {
		v, ok := m[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s is missing", k))
		case !hasKind(v, kind):
			bad = append(bad, fmt.Sprintf("%s is %s, not %s", k, show(v), kind))
		}
	}
	if exact {
		for k := range m {
			if _, ok := want[k]; !ok {
				bad = append(bad, fmt.Sprintf("%s is not a field of the resource", k))
			}
		}
	}
	return bad
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// §2.4: the receipt's fields and types.
var receiptFields = map[string]fieldKind{
	"email":             kString,
	"status":            kString,
	"score":             kInt,
	"checks":            kObject,
	"probed_at":         kDateTime,
	"latency_ms":        kInt,
	"kid":               kString,
	"sig":               kString,
	"credits_remaining": kInt,
	"cached":            kBool,
}

// §2.5: the checks object. Required: syntax, mx, is_disposable,
// is_role_based, is_free_provider, is_catch_all, auth.
var (
	checksRequired = map[string]fieldKind{
		"syntax":           kBool,
		"mx":               kBool,
		"is_disposable":    kBool,
		"is_role_based":    kBool,
		"is_free_provider": kBool,
		"is_catch_all":     kBool,
		"auth":             kObject,
	}
	checksOptional = map[string]fieldKind{
		"reason":        kString,
		"domain":        kString,
		"mx_host":       kString,
		"spf":           kString,
		"dkim":          kString,
		"dmarc":         kString,
		"mta_sts":       kBool,
		"svc_certified": kBool,
	}
)

// §2.6: the auth object. "All keys are optional."
var authKeys = map[string]fieldKind{
	"spf":                    kString,
	"dkim":                   kString,
	"dmarc":                  kString,
	"dmarc_policy":           kString,
	"svc_certified":          kBool,
	"svc_trust_level":        kInt,
	"svc_key_id":             kString,
	"mta_sts":                kBool,
	"tls_rpt":                kBool,
	"dane":                   kBool,
	"dnssec":                 kBool,
	"bimi":                   kBool,
	"bimi_vmc":               kBool,
	"caa":                    kBool,
	"fcrdns":                 kBool,
	"ptr":                    kString,
	"dmarc_subdomain_policy": kString,
	"dmarc_alignment_spf":    kString,
	"dmarc_alignment_dkim":   kString,
	"dmarc_rua_set":          kBool,
	"tls_version":            kString,
	"tls_cipher":             kString,
	"abuse_mailbox":          kBool,
	"postmaster_mailbox":     kBool,
	"helo_matches_rdns":      kBool,
	"dnsbl_clean":            kBool,
	"dnsbl_lists_on":         kArrayOfString,
	"dnswl_listed":           kBool,
	"domain_age_days":        kInt,
}

// receiptProblems lists every way m breaks §2.4 to §2.6.
func receiptProblems(m map[string]any) []string {
	// §2.4: "All of these are top-level fields. kid and sig are not
	// nested." "All fields of the receipt are required."
	bad := checkFields(m, receiptFields, false)
	if s, ok := m["status"].(string); ok && !contains(verdicts, s) {
		bad = append(bad, fmt.Sprintf("status %q is not in the verdict enumeration", s))
	}
	// §2.4 score: "integer", "0 to 100".
	if n, ok := asInt(m["score"]); ok && (n < 0 || n > 100) {
		bad = append(bad, fmt.Sprintf("score %d is not within 0 to 100", n))
	}
	// §2.4 probed_at: "ISO 8601 UTC with milliseconds".
	if s, ok := m["probed_at"].(string); ok && !isoMillisUTC.MatchString(s) {
		bad = append(bad, fmt.Sprintf("probed_at %q is not ISO 8601 UTC with milliseconds", s))
	}
	// latency_ms is a duration: never negative.
	if n, ok := asInt(m["latency_ms"]); ok && n < 0 {
		bad = append(bad, fmt.Sprintf("latency_ms %d is negative", n))
	}
	if s, ok := m["kid"].(string); ok && s == "" {
		bad = append(bad, "kid is empty")
	}
	checks := obj(m["checks"])
	if checks == nil {
		return bad
	}
	// §2.5 "Required keys: syntax, mx, is_disposable, is_role_based,
	// is_free_provider, is_catch_all, auth."
	for _, p := range checkFields(checks, checksRequired, false) {
		bad = append(bad, "checks."+p)
	}
	for k, kind := range checksOptional {
		if v, ok := checks[k]; ok && !hasKind(v, kind) {
			bad = append(bad, fmt.Sprintf("checks.%s is %s, not %s", k, show(v), kind))
		}
	}
	// §2.5 reason: "checks.reason enumeration", "optional".
	if r, ok := checks["reason"].(string); ok && !contains(reasons, r) {
		bad = append(bad, fmt.Sprintf("checks.reason %q is not in the enumeration", r))
	}
	// Decision: checks and auth hold only the keys §2.5 and §2.6 list.
	for k := range checks {
		if _, ok := checksRequired[k]; !ok {
			if _, ok := checksOptional[k]; !ok {
				bad = append(bad, fmt.Sprintf("checks.%s is not a key of §2.5", k))
			}
		}
	}
	// §2.6: each key, when present, has its type.
	if auth := obj(checks["auth"]); auth != nil {
		for k, v := range auth {
			kind, ok := authKeys[k]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("checks.auth.%s is not a key of §2.6", k))
			case !hasKind(v, kind):
				bad = append(bad, fmt.Sprintf("checks.auth.%s is %s, not %s", k, show(v), kind))
			}
		}
		// §2.5: "The authentication-related keys are repeated both
		// flat here and in full under auth."
		for _, k := range []string{"spf", "dkim", "dmarc", "mta_sts", "svc_certified"} {
			if v, ok := checks[k]; ok {
				if av, ok := auth[k]; !ok || show(av) != show(v) {
					bad = append(bad, fmt.Sprintf("checks.%s = %s is not a copy of checks.auth.%s = %s", k, show(v), k, show(av)))
				}
			}
		}
	}
	return bad
}

// csvHeader is §4.4's header row.
var csvHeader = []string{"email", "status", "score", "is_disposable", "is_role_based", "is_catch_all",
	"is_free_provider", "mx_host", "latency_ms", "probed_at"}

// isDigits says whether s is a non-empty string of decimal digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil && strings.Trim(s, "0123456789") == ""
}
