package pebble

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cockroachdb/pebble/v2"
)

// Pebble's own metrics, exported at scrape time (verifyd_storage_pebble_*):
//
//	verifyd_storage_pebble_compactions_total        compactions run
//	verifyd_storage_pebble_compaction_debt_bytes    bytes to compact to a stable LSM
//	verifyd_storage_pebble_flushes_total            memtable flushes
//	verifyd_storage_pebble_wal_bytes_written_total  bytes written to the WAL
//	verifyd_storage_pebble_wal_files                live WAL files
//	verifyd_storage_pebble_disk_usage_bytes         disk space of the database
//	verifyd_storage_pebble_read_amplification       sublevels a read may visit
//
// The WAL syncs are verifyd_storage_commits_total{sync="true"}.
var (
	exported atomic.Pointer[DB] // the DB the gauges read: the last opened
	snapMu   sync.Mutex
	snap     *pebble.Metrics
	snapAt   time.Time
)

func init() {
	gauge := func(name string, f func(m *pebble.Metrics) float64) {
		metrics.NewGauge(name, func() float64 {
			m := pebbleSnapshot()
			if m == nil {
				return 0
			}
			return f(m)
		})
	}
	gauge("verifyd_storage_pebble_compactions_total", func(m *pebble.Metrics) float64 { return float64(m.Compact.Count) })
	gauge("verifyd_storage_pebble_compaction_debt_bytes", func(m *pebble.Metrics) float64 { return float64(m.Compact.EstimatedDebt) })
	gauge("verifyd_storage_pebble_flushes_total", func(m *pebble.Metrics) float64 { return float64(m.Flush.Count) })
	gauge("verifyd_storage_pebble_wal_bytes_written_total", func(m *pebble.Metrics) float64 { return float64(m.WAL.BytesWritten) })
	gauge("verifyd_storage_pebble_wal_files", func(m *pebble.Metrics) float64 { return float64(m.WAL.Files) })
	gauge("verifyd_storage_pebble_disk_usage_bytes", func(m *pebble.Metrics) float64 { return float64(m.DiskSpaceUsage()) })
	gauge("verifyd_storage_pebble_read_amplification", func(m *pebble.Metrics) float64 { return float64(m.ReadAmp()) })
}

// pebbleSnapshot returns the exported DB's metrics, taken at most once a
// second so that one scrape reads Pebble once.
func pebbleSnapshot() *pebble.Metrics {
	db := exported.Load()
	if db == nil {
		return nil
	}
	snapMu.Lock()
	defer snapMu.Unlock()
	if snap == nil || time.Since(snapAt) > time.Second {
		if db.check() != nil {
			return nil
		}
		snap, snapAt = db.pdb.Metrics(), time.Now()
	}
	return snap
}

// ExportMetrics makes db the database whose Pebble metrics verifyd exports.
func (db *DB) ExportMetrics() { exported.Store(db) }
