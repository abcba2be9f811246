// Package storage is the storage contract of verifyd: the records (Account,
// APIKey, Entry, Hold, Result, Job, Event, User, Session, ...), the errors,
// the rules every backend makes records by (records.go: ids, keys,
// tokens, the checks of their arguments) and the interfaces the server
// uses (contract.go: Store and one small interface per area). Two
// backends implement it: storage/pebble (one box, the default) and
// storage/postgres (a fleet of boxes on one database, docs/fleet.md);
// storage/storagetest is the suite both pass. README.md has the Pebble
// key layout and the durability of each record.
package storage
