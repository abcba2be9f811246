//go:build !linux

package sdnotify

import "errors"

// monotonicUsec is only needed under systemd, which is Linux only.
func monotonicUsec() (uint64, error) {
	return 0, errors.New("CLOCK_MONOTONIC not supported on this system")
}
