package outcomes

import "github.com/VictoriaMetrics/metrics"

// The metrics of delivery outcomes (README.md lists them).
var (
	unmatched          = metrics.NewCounter(`verifyd_outcomes_unmatched_total`)
	falseNegatives     = metrics.NewCounter(`verifyd_outcomes_false_negatives_total`)
	learnedAddresses   = metrics.NewCounter(`verifyd_outcomes_learned_total{kind="address_bounced"}`)
	learnedDomains     = metrics.NewCounter(`verifyd_outcomes_learned_total{kind="domain_bounces"}`)
	flaggedDomains     = metrics.NewGauge(`verifyd_outcomes_bouncing_domains`, nil)
	evidenceAccounts   = metrics.NewGauge(`verifyd_outcomes_evidence_accounts`, nil)
	evidenceSkipped    = metrics.NewCounter(`verifyd_outcomes_evidence_reads_skipped_total`)
	purged             = metrics.NewCounter(`verifyd_outcomes_purged_total`)
	calibrated         = metrics.NewCounter(`verifyd_outcomes_calibrated_scores_total`)
	refits             = metrics.NewCounter(`verifyd_outcomes_calibration_fits_total`)
	calibratedAccounts = metrics.NewGauge(`verifyd_outcomes_calibrated_accounts`, nil)
)

// outcomesStored counts the new outcomes by source and event.
func outcomesStored(source, event string) *metrics.Counter {
	return metrics.GetOrCreateCounter(`verifyd_outcomes_stored_total{source="` + source + `",event="` + event + `"}`)
}

// applied counts the verdicts outcomes changed, by kind.
func applied(kind string) *metrics.Counter {
	return metrics.GetOrCreateCounter(`verifyd_outcomes_applied_total{kind="` + kind + `"}`)
}
