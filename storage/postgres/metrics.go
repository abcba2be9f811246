package postgres

import (
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics of the PostgreSQL storage (docs/fleet.md lists them).
var (
	txRetries          = metrics.NewCounter("verifyd_storage_pg_tx_retries_total")
	idemRetries        = metrics.NewCounter("verifyd_storage_pg_idem_retries_total")
	heartbeatFailures  = metrics.NewCounter("verifyd_storage_pg_heartbeat_failures_total")
	staleHoldsReleased = metrics.NewCounter("verifyd_storage_pg_stale_holds_released_total")
	slicesLeased       = metrics.NewCounter("verifyd_storage_pg_job_slices_leased_total")
	chargesPerTx       = metrics.NewHistogram("verifyd_storage_pg_charges_per_transaction")
	// chargeGathers counts the charge transactions that waited
	// Options.ChargeGather for more of their account's (combine.go).
	chargeGathers = metrics.NewCounter("verifyd_storage_pg_charge_gathers_total")
	// roundTrips counts the exchanges with the database (roundtrips.go).
	roundTrips = metrics.NewCounter("verifyd_storage_pg_round_trips_total")
	// idemStray is the pending idempotency keys of this box whose
	// requests ended without writing their end (idemlocal.go); idemStrayEnded
	// counts those the heartbeat then ended.
	idemStray      = metrics.NewGauge("verifyd_storage_pg_idem_stray_keys", nil)
	idemStrayEnded = metrics.NewCounter("verifyd_storage_pg_idem_stray_ended_total")
	// clockSkew is this box's wall clock minus the database's, at the
	// last heartbeat (clock.go).
	clockSkew = metrics.NewGauge("verifyd_storage_pg_clock_skew_seconds", nil)
	// pgReady is 1 while the box can write to a primary (primary.go),
	// primaryChanges counts the times it found another server as its
	// primary, readOnlyErrors the writes a read-only server refused.
	pgReady = sync.OnceValue(func() *metrics.Gauge {
		// Made by the first check of a fleet box: a single box, on
		// Pebble, exports no such series (an alert on 0 would fire).
		return metrics.GetOrCreateGauge("verifyd_storage_pg_ready", nil)
	})
	primaryChanges = metrics.NewCounter("verifyd_storage_pg_primary_changes_total")
	readOnlyErrors = metrics.NewCounter("verifyd_storage_pg_read_only_errors_total")
	// lostCharges counts the charges answered 200 that a reconciliation
	// did not find on the database (reconcile.go); reconciliations the
	// reconciliations run.
	lostCharges     = metrics.NewCounter("verifyd_storage_pg_lost_charges_total")
	reconciliations = metrics.NewCounter("verifyd_storage_pg_reconciliations_total")
)

// The credit leases (leases.go): blocks taken and returned, parts handed
// out, and parts charged from the available credits because their block
// was gone.
var (
	leasesTaken    = metrics.NewCounter("verifyd_storage_pg_credit_leases_taken_total")
	leasesReturned = metrics.NewCounter("verifyd_storage_pg_credit_leases_returned_total")
	leaseParts     = metrics.NewCounter("verifyd_storage_pg_credit_lease_holds_total")
	leaseDirect    = metrics.NewCounter("verifyd_storage_pg_credit_lease_direct_charges_total")
)
