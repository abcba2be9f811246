package world

// Open returns how many SMTP sessions are open right now (accepted and not
// yet ended). Sessions reach the log only when they end; tests that must act
// while one is in flight wait on Open instead.
func (s *SMTPServers) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
