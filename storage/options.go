package storage

import "time"

// DefaultIdemTTL is how long an idempotency record is kept by default
// (spec §7: 24 h), on every backend.
const DefaultIdemTTL = 24 * time.Hour
