package sdnotify

import (
	"syscall"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC of clock_gettime(2).
const clockMonotonic = 1

// monotonicUsec reads CLOCK_MONOTONIC in microseconds, the clock of
// MONOTONIC_USEC. Go's own monotonic reading counts from process start, so
// it cannot serve.
func monotonicUsec() (uint64, error) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, errno
	}
	return uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3, nil
}
