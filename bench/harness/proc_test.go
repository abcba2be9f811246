package harness

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses: fields count from the
	// last ')'.
	line := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1234 0 0 0 731 219 0 0 20 0 9 0 123456 0 0\n"
	ut, st, err := parseStat([]byte(line))
	if err != nil || ut != 731 || st != 219 {
		t.Fatalf("utime %d stime %d err %v, want 731, 219", ut, st, err)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 x 0"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	text := "Name:\tverifyd\nVmPeak:\t 900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t12\n"
	rss, hwm, err := parseStatus([]byte(text))
	if err != nil || rss != 100<<20 || hwm != 200<<20 {
		t.Fatalf("rss %d hwm %d err %v", rss, hwm, err)
	}
	if _, _, err := parseStatus([]byte("Name:\tkthreadd\n")); err == nil {
		t.Error("status without VmRSS parsed")
	}
	if _, _, err := parseStatus([]byte("VmRSS:\t 12 MB\nVmHWM:\t 1 kB\n")); err == nil {
		t.Error("a unit other than kB parsed")
	}
}

// rusageCPU is this process's user+system time from getrusage(2), a source
// independent of /proc.
func rusageCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// burn spins until getrusage says this process used d more CPU (or 20 s
// passed: the machine may be busy).
func burn(t *testing.T, d time.Duration) time.Duration {
	start := rusageCPU(t)
	var x uint64
	for deadline := time.Now().Add(20 * time.Second); rusageCPU(t)-start < d && time.Now().Before(deadline); {
		for i := range 100000 {
			x += uint64(i) ^ x
		}
	}
	sinkN = x
	return rusageCPU(t) - start
}

var sinkN uint64

var sink []byte

func TestReadProcSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	pid := os.Getpid()
	before, err := ReadProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS <= 0 || before.HWM < before.RSS {
		t.Fatalf("rss %d hwm %d", before.RSS, before.HWM)
	}
	// The reference is getrusage over the same window as the meter: the
	// burn and the 64 MiB touch (with the page faults and GC work it
	// causes) both fall inside it.
	ref0 := rusageCPU(t)
	m := StartMeter(pid)
	used := burn(t, 300*time.Millisecond)
	// Touch 64 MiB so the peak rises.
	sink = make([]byte, 64<<20)
	for i := 0; i < len(sink); i += 4096 {
		sink[i] = 1
	}
	u := m.Stop()
	ref := rusageCPU(t) - ref0
	sink = nil
	after, err := ReadProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in 10 ms ticks, read at each end of the window; the
	// meter's window is inside the reference's, so the meter may miss what
	// ran between the two reads (the meter's own start and stop), never
	// more. No bound here depends on how busy the machine is.
	const tick = 10 * time.Millisecond
	if d := after.CPU - before.CPU; d < ref-2*tick {
		t.Errorf("/proc says CPU rose by %v; getrusage says %v over a shorter window", d, ref)
	}
	if u.CPU > ref+2*tick || u.CPU < ref/2 || u.CPU < used-2*tick {
		t.Errorf("meter: CPU %v, getrusage %v over the same window", u.CPU, ref)
	}
	if c := u.Cores(); c <= 0 || c > float64(runtime.NumCPU())+0.5 {
		t.Errorf("cores %v", c)
	}
	if u.PeakRSS < 64<<20 {
		t.Errorf("peak RSS %d MiB after touching 64 MiB", u.PeakRSS>>20)
	}
	// A meter of no process measures nothing and does not block.
	if z := StartMeter(0).Stop(); z.CPU != 0 || z.PeakRSS != 0 {
		t.Errorf("meter of pid 0: %+v", z)
	}
}

func TestReadMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	m := ReadMachine()
	if m.CPUs < 1 || m.MemTotal <= 0 || m.Kernel == "" || !strings.HasPrefix(m.GoVersion, "go") {
		t.Errorf("machine %+v", m)
	}
	if got := cpuModel([]byte("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n")); got != "AMD EPYC 7B13" {
		t.Errorf("cpu model %q", got)
	}
	if got := memTotal([]byte("MemTotal:       24684096 kB\nMemFree: 1 kB\n")); got != 24684096<<10 {
		t.Errorf("mem total %d", got)
	}
}
