package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (the kernel converts from
// its own HZ before exporting).
const clockTicks = 100

// ProcSample is what /proc says of one process at one moment.
type ProcSample struct {
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// RSS is the resident set size now (VmRSS) and HWM its peak (VmHWM)
	// since the start or since the last ResetPeakRSS, in bytes.
	RSS, HWM int64
}

// ReadProc reads /proc/<pid>/stat and /proc/<pid>/status.
func ReadProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, err
	}
	ut, st, err := parseStat(stat)
	if err != nil {
		return ProcSample{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, err
	}
	rss, hwm, err := parseStatus(status)
	if err != nil {
		return ProcSample{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return ProcSample{
		CPU: time.Duration(ut+st) * time.Second / clockTicks,
		RSS: rss, HWM: hwm,
	}, nil
}

// parseStat returns utime and stime (fields 14 and 15, in clock ticks) of a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces and parentheses itself, so fields are counted from the
// last ')'.
func parseStat(b []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, so f[11], stime f[12].
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	if utime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}

// parseStatus returns VmRSS and VmHWM in bytes from /proc/<pid>/status.
func parseStatus(b []byte) (rss, hwm int64, err error) {
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := parseKB(v)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmRSS" {
			rss, haveRSS = n, true
		} else {
			hwm, haveHWM = n, true
		}
	}
	if !haveRSS || !haveHWM {
		return 0, 0, errors.New("no VmRSS or VmHWM line (a kernel thread, or a zombie?)")
	}
	return rss, hwm, nil
}

// parseKB parses "   12345 kB" into bytes.
func parseKB(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("%q is not \"N kB\"", strings.TrimSpace(s))
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, err
	}
	return n << 10, nil
}

// ResetPeakRSS resets VmHWM of pid to its current RSS (writing 5 to
// /proc/<pid>/clear_refs, Linux 4.0+), so the next ReadProc shows the peak
// since now. The process must be ours.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// Meter measures one process over an interval: CPU time used and peak RSS.
// The peak is VmHWM after a reset at Start (when the kernel allows the
// reset), and in any case the largest VmRSS sampled every 50 ms, so a
// kernel without clear_refs still gives a peak of the interval.
type Meter struct {
	pid      int
	start    ProcSample
	resetOK  bool
	began    time.Time
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	maxRSS   int64
	readErrs int
}

// Usage is what a Meter measured.
type Usage struct {
	Wall time.Duration
	CPU  time.Duration
	// PeakRSS is in bytes.
	PeakRSS int64
	// PeakExact is true when PeakRSS comes from a reset VmHWM (every page
	// counted), false when only from 50 ms samples of VmRSS.
	PeakExact bool
}

// Cores is CPU time over wall time: how many cores the process kept busy.
func (u Usage) Cores() float64 {
	if u.Wall <= 0 {
		return 0
	}
	return u.CPU.Seconds() / u.Wall.Seconds()
}

// StartMeter starts measuring pid. A pid of 0 measures nothing (every
// figure stays 0), for a process that is not running.
func StartMeter(pid int) *Meter { return startMeter(pid, true) }

// StartSampledMeter is StartMeter without resetting VmHWM, for a meter
// inside the interval of another one: its peak comes from the samples only.
func StartSampledMeter(pid int) *Meter { return startMeter(pid, false) }

func startMeter(pid int, reset bool) *Meter {
	m := &Meter{pid: pid, began: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if pid == 0 {
		close(m.done)
		return m
	}
	m.resetOK = reset && ResetPeakRSS(pid) == nil
	m.start, _ = ReadProc(pid)
	m.maxRSS = m.start.RSS
	go m.sample()
	return m
}

func (m *Meter) sample() {
	defer close(m.done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			s, err := ReadProc(m.pid)
			m.mu.Lock()
			if err != nil {
				m.readErrs++
			} else if s.RSS > m.maxRSS {
				m.maxRSS = s.RSS
			}
			m.mu.Unlock()
		}
	}
}

// Stop ends the measurement and returns it.
func (m *Meter) Stop() Usage {
	u := Usage{Wall: time.Since(m.began)}
	if m.pid == 0 {
		return u
	}
	close(m.stop)
	<-m.done
	end, err := ReadProc(m.pid)
	m.mu.Lock()
	defer m.mu.Unlock()
	u.PeakRSS = m.maxRSS
	if err == nil {
		u.CPU = end.CPU - m.start.CPU
		u.PeakRSS = max(u.PeakRSS, end.RSS)
		if m.resetOK {
			u.PeakRSS = max(u.PeakRSS, end.HWM)
			u.PeakExact = true
		}
	}
	return u
}

// Machine describes the computer a run happened on.
type Machine struct {
	CPUModel  string `json:"cpu_model"`
	CPUs      int    `json:"cpus"`
	MemTotal  int64  `json:"mem_total_bytes"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
}

// ReadMachine reads /proc/cpuinfo, /proc/meminfo and the kernel release.
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(b)
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotal = memTotal(b)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func cpuModel(cpuinfo []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == "MemTotal" {
			n, _ := parseKB(v)
			return n
		}
	}
	return 0
}
