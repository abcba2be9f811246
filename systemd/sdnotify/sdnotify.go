// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3), systemd.service(5) Type=notify) and its watchdog, with the
// standard library only.
//
// The flow of a Type=notify service:
//
//  1. systemd starts the service with $NOTIFY_SOCKET naming a unix datagram
//     socket: a path ("/run/systemd/notify") or, with a leading "@", a
//     socket in the abstract namespace (unix(7)).
//  2. Once the service is ready (storage open, listeners up) it sends
//     "READY=1" ([Ready]); only then does "systemctl start" return and do
//     units ordered after it start.
//  3. If the unit has WatchdogSec=, systemd sets $WATCHDOG_USEC (and
//     $WATCHDOG_PID) and expects "WATCHDOG=1" more often than that; a
//     service that falls silent is killed with SIGABRT and, with Restart=,
//     restarted. [WatchdogTick] drives the pings from the service's main
//     loop at half the interval; [RunWatchdog] does the same on its own
//     goroutine, both only while a health check passes.
//  4. On SIGHUP the service sends "RELOADING=1" with "MONOTONIC_USEC="
//     ([Reloading]), reloads, and sends "READY=1" again (the form that
//     Type=notify-reload, systemd 253+, requires; older Type=notify managers
//     accept it too).
//  5. On SIGTERM it sends "STOPPING=1" ([Stopping]) and drains.
//
// "STATUS=" ([Status]) is free text that "systemctl status" shows, and
// "EXTEND_TIMEOUT_USEC=" ([ExtendTimeout]) asks for more time during a slow
// start or stop.
//
// Every function is a no-op returning nil when $NOTIFY_SOCKET is unset, so
// the daemon calls them unconditionally, also outside systemd. Each message
// is one datagram of newline-separated VAR=value assignments, sent from a
// fresh socket; systemd learns the sender's PID from the kernel
// (SCM_CREDENTIALS), and with the default NotifyAccess=main accepts only
// messages of the main process, which every goroutine of this process is.
package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The assignments of sd_notify(3) that verifyd sends.
const (
	stateReady     = "READY=1"
	stateStopping  = "STOPPING=1"
	stateReloading = "RELOADING=1"
	stateWatchdog  = "WATCHDOG=1"
)

// ErrUnsupportedSocket is returned for a $NOTIFY_SOCKET that is neither an
// absolute path nor an abstract name ("@…"), e.g. the "vsock:" form that
// newer systemd versions use for virtual machines, which verifyd does not
// need.
var ErrUnsupportedSocket = errors.New("sdnotify: unsupported NOTIFY_SOCKET")

// Notify sends state, one or more newline-separated assignments, to the
// service manager named by $NOTIFY_SOCKET. It returns nil without sending
// anything when $NOTIFY_SOCKET is unset or empty.
func Notify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if addr[0] != '/' && addr[0] != '@' {
		return fmt.Errorf("%w: %q", ErrUnsupportedSocket, addr)
	}
	// A leading "@" makes the net package use the abstract namespace
	// (sun_path starting with a NUL byte), as sd_notify does.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	return nil
}

// Ready tells the manager that start-up (or a reload) is complete.
func Ready() error { return Notify(stateReady) }

// Stopping tells the manager that the service is shutting down.
func Stopping() error { return Notify(stateStopping) }

// Reloading tells the manager that the service is reloading its
// configuration; send [Ready] when done. MONOTONIC_USEC carries
// CLOCK_MONOTONIC, which Type=notify-reload uses to tell this reload from an
// earlier one.
func Reloading() error {
	usec, err := monotonicUsec()
	if err != nil {
		return fmt.Errorf("sdnotify: cannot read CLOCK_MONOTONIC: %w", err)
	}
	return Notify(stateReloading + "\nMONOTONIC_USEC=" + strconv.FormatUint(usec, 10))
}

// Watchdog is one keep-alive ping of the service watchdog.
func Watchdog() error { return Notify(stateWatchdog) }

// Status sets the one-line status text shown by "systemctl status". Line
// breaks in text become spaces: a newline would start another assignment.
func Status(text string) error {
	text = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(text)
	return Notify("STATUS=" + text)
}

// ExtendTimeout asks the manager for d more time before the current start,
// reload or stop times out (TimeoutStartSec=, TimeoutStopSec=), e.g. while
// storage recovers a large write-ahead log. Send it again before d runs out.
func ExtendTimeout(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return Notify("EXTEND_TIMEOUT_USEC=" + strconv.FormatInt(d.Microseconds(), 10))
}

// WatchdogInterval returns the watchdog timeout the manager expects pings
// within ($WATCHDOG_USEC), and whether the watchdog is enabled for this
// process: $WATCHDOG_USEC is a positive number and $WATCHDOG_PID, if set,
// is our PID (sd_watchdog_enabled(3)).
func WatchdogInterval() (time.Duration, bool) {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0, false
	}
	if p := os.Getenv("WATCHDOG_PID"); p != "" {
		pid, err := strconv.Atoi(p)
		if err != nil || pid != os.Getpid() {
			return 0, false
		}
	}
	return time.Duration(usec) * time.Microsecond, true
}

// WatchdogTick is the watchdog for a select loop: a channel that ticks at
// half the watchdog interval, so that the loop itself pings with
// [Watchdog] on each tick (a loop that hangs then stops the pings), and a
// stop function. When the watchdog is not enabled the channel is nil,
// which a select never chooses, and stop does nothing.
//
//	tick, stop := sdnotify.WatchdogTick()
//	defer stop()
//	for {
//		select {
//		case <-tick:
//			if healthy() {
//				_ = sdnotify.Watchdog()
//			}
//		case ...
//		}
//	}
func WatchdogTick() (<-chan time.Time, func()) {
	interval, ok := WatchdogInterval()
	if !ok {
		return nil, func() {}
	}
	t := time.NewTicker(max(interval/2, time.Microsecond))
	return t.C, t.Stop
}

// RunWatchdog pings the watchdog until ctx ends: at once, then every half
// interval, each time only if healthy() returns true. A healthy() that
// blocks or keeps failing lets the pings stop, and the manager then kills
// and restarts the service. RunWatchdog returns at once when the watchdog
// is not enabled (see [WatchdogInterval]); otherwise when ctx ends. Run it
// on its own goroutine, or use [WatchdogTick] in the main loop. A failed
// send is not fatal: the next tick tries again, and persistent failure ends
// in the restart the watchdog is for.
func RunWatchdog(ctx context.Context, healthy func() bool) {
	tick, stop := WatchdogTick()
	if tick == nil {
		return
	}
	defer stop()
	for {
		if ctx.Err() != nil {
			return
		}
		if healthy() {
			_ = Watchdog()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}
