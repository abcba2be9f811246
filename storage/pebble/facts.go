package pebble

import (
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/verifyd/verifyd/storage"
)

// Domain knowledge (the facts of probe.Facts and server/outcomes): a
// value of a kind for a key, until it expires. On one box they are this
// database's; a fleet shares them in PostgreSQL's domain_facts.

func factKey(kind, key string) []byte {
	k := keyBuf(prefixFact, len(kind)+1+len(key))
	return append(append(append(k, kind...), '/'), key...)
}

// Fact returns the fact of kind for key; ok is false when there is none
// or it expired.
func (db *DB) Fact(kind, key string) (string, time.Time, bool, error) {
	if err := db.check(); err != nil {
		return "", time.Time{}, false, err
	}
	v, err := db.get(factKey(kind, key))
	if errors.Is(err, storage.ErrNotFound) {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, err
	}
	d := newDec(v, "fact")
	val, exp := d.str(), fromMs(d.varint())
	if d.err != nil {
		return "", time.Time{}, false, d.err
	}
	if !exp.After(db.now()) {
		return "", time.Time{}, false, nil
	}
	return val, exp, true, nil
}

// PutFact records a fact until expires, synced.
func (db *DB) PutFact(kind, key, value string, expires time.Time) error {
	return db.PutFacts([]storage.Fact{{Kind: kind, Key: key, Value: value, Expires: expires}})
}

// PutFacts records facts in one synced batch, the last of a kind and key
// winning.
func (db *DB) PutFacts(fs []storage.Fact) error {
	if err := db.check(); err != nil {
		return err
	}
	b := db.pdb.NewBatch()
	for _, f := range fs {
		b.Set(factKey(f.Kind, f.Key), newEnc(len(f.Value)+10).str(f.Value).varint(toMs(f.Expires)).b, nil)
	}
	return db.commit(b, pebble.Sync)
}

// FactsOfKind returns the facts of a kind that have not expired, by key.
func (db *DB) FactsOfKind(kind string) (map[string]string, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	p := factKey(kind, "")
	now := db.now()
	out := map[string]string{}
	err := db.scanPrefix(p, func(k, v []byte) (bool, error) {
		d := newDec(v, "fact")
		val, exp := d.str(), fromMs(d.varint())
		if d.err != nil {
			return false, d.err
		}
		if exp.After(now) {
			out[string(k[len(p):])] = val
		}
		return true, nil
	})
	return out, err
}
