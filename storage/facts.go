package storage

import "time"

// Fact is a piece of domain knowledge a store keeps for the engine and
// the outcomes service (a fleet's boxes share them): Value of Kind for
// Key, until Expires.
type Fact struct {
	Kind, Key, Value string
	Expires          time.Time
}
