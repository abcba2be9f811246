package storage

import (
	"time"
)

// DayCount is one UTC day of an account's history: how many rows (single
// and batch, cached answers included) it holds per verdict.
type DayCount struct {
	Day    time.Time // 00:00 UTC
	Counts map[string]int
}

// Total is the day's number of rows.
func (d DayCount) Total() int {
	n := 0
	for _, c := range d.Counts {
		n += c
	}
	return n
}

// MaxStatDays bounds DailyCounts.
const MaxStatDays = 366
