package pebble

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/verifyd/verifyd/storage"
)

// Versions. A data directory carries its schema version (meta/version,
// decimal text), written when it is created. Every binary value carries a
// version byte too (valueVersion, codec.go), and the JSON records (accounts,
// keys, jobs, events, users) take new fields only as additions that an
// older record reads as their zero value. A change that needs the records
// already on disk rewritten is a new schema version with an upgrade step:
// Open runs the steps from the directory's version to this build's; a
// step stages its writes in a batch (applied in parts when it grows
// large, each part idempotent) whose last, synced part writes the
// version, so a crash in the middle leaves the directory at the version
// before and the next Open runs the step again. A directory of a newer version is refused: a newer
// verifyd wrote it (downgrade from its backup, verifyctl backup).
//
// The versions:
//
//	1  the first (up to b4dd917)
//	2  jobs count their results by verdict and reason (storage.Job.Reasons);
//	   the step counts the jobs already stored from their receipts
//	3  the verdict index (vidx/, outcomes.go) that matches delivery
//	   outcomes to verdicts; the step indexes the results already stored
const schemaVersion = 3

// upgrades[v] upgrades a directory at version v to v+1, staging its
// writes in b (applyPart applies what is staged when it grows large).
var upgrades = map[int]func(db *DB, b *pebble.Batch) error{
	1: upgradeJobReasons,
	2: upgradeVerdictIndex,
}

// upgradePart is the size at which a step applies what it staged.
const upgradePart = 32 << 20

// applyPart applies b, unsynced, and empties it, once it holds
// upgradePart bytes: a step's writes must be idempotent, since a crash
// before the version is written runs the step again.
func (db *DB) applyPart(b *pebble.Batch) error {
	if b.Len() < upgradePart {
		return nil
	}
	if err := db.pdb.Apply(b, pebble.NoSync); err != nil {
		return err
	}
	b.Reset()
	return nil
}

// checkVersion creates the version of a new directory, or upgrades an
// older one to schemaVersion.
func (db *DB) checkVersion() error {
	v, err := db.get(keyMetaVersion)
	if errors.Is(err, storage.ErrNotFound) {
		b := db.pdb.NewBatch()
		b.Set(keyMetaVersion, []byte(strconv.Itoa(schemaVersion)), nil)
		return db.commit(b, pebble.Sync)
	}
	if err != nil {
		return err
	}
	have, err := strconv.Atoi(string(v))
	switch {
	case err != nil || have < 1:
		return fmt.Errorf("storage: schema version %q is not a version", v)
	case have > schemaVersion:
		return fmt.Errorf("storage: the data directory is at schema version %d, newer than this build's %d: a newer verifyd wrote it; run that verifyd or a newer one", have, schemaVersion)
	}
	for ; have < schemaVersion; have++ {
		start := time.Now()
		b := db.pdb.NewBatch()
		if err := upgrades[have](db, b); err != nil {
			b.Close()
			return fmt.Errorf("storage: upgrading the data directory from schema version %d to %d: %w", have, have+1, err)
		}
		b.Set(keyMetaVersion, []byte(strconv.Itoa(have+1)), nil)
		if err := db.commit(b, pebble.Sync); err != nil {
			return err
		}
		db.log.Info("data directory upgraded", "from", have, "to", have+1, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// upgradeJobReasons (1 → 2) counts each stored job's results by verdict
// and reason, reading the reason from each result's receipt.
func upgradeJobReasons(db *DB, b *pebble.Batch) error {
	return db.scanPrefix([]byte(prefixJob), func(k, v []byte) (bool, error) {
		var j storage.Job
		if err := json.Unmarshal(v, &j); err != nil {
			return false, fmt.Errorf("job %s: %w", k, err)
		}
		j.Reasons = nil
		err := db.scanPrefix(jobResultPrefix(j.ID), func(_, rv []byte) (bool, error) {
			r, _, _, err := decodeResult(rv)
			if err != nil {
				return false, fmt.Errorf("job %s: %w", j.ID, err)
			}
			if reason := storage.VerdictOf(r).Reason; reason != "" {
				if j.Reasons == nil {
					j.Reasons = map[string]int{}
				}
				j.Reasons[storage.ReasonKey(r.Status, reason)]++
			}
			return true, nil
		})
		if err != nil {
			return false, err
		}
		return true, stageJob(b, &j)
	})
}
