package authsig

// InFlight is the number of collections registered (running or queued),
// refreshes included: tests wait for a background refresh with it.
func InFlight(c *Collector) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.flights)
}
