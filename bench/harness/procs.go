package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process the harness started: mailworld or verifyd. Its
// stdout and stderr are kept in files beside its data (name.stdout.log,
// name.stderr.log) and handed line by line to the callbacks given at start.
type Proc struct {
	Name string
	PID  int
	Bin  string
	Args []string
	// Logs are the paths of the stdout and stderr files.
	StdoutLog, StderrLog string

	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	readers sync.WaitGroup
}

// spawner starts every child from one goroutine locked to its OS thread
// for the life of the harness: Pdeathsig (the child is killed when the
// harness dies, even by SIGKILL) is tied to the thread that forked, not the
// process, and Go may retire other threads.
type spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

var theSpawner spawner

func (s *spawner) start(cmd *exec.Cmd) error {
	s.once.Do(func() {
		s.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the harness
			for r := range s.reqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	s.reqs <- spawnReq{cmd, errc}
	return <-errc
}

// StartProc starts bin with args in dir. onStdout and onStderr (either may
// be nil) get every line of output; they must not block for long.
func StartProc(name, bin string, args []string, dir string, onStdout, onStderr func(string)) (*Proc, error) {
	p := &Proc{
		Name: name, Bin: bin, Args: args,
		StdoutLog: filepath.Join(dir, name+".stdout.log"),
		StderrLog: filepath.Join(dir, name+".stderr.log"),
		exited:    make(chan struct{}),
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = childAttr()
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	outFile, err := os.Create(p.StdoutLog)
	if err != nil {
		return nil, err
	}
	errFile, err := os.Create(p.StderrLog)
	if err != nil {
		outFile.Close()
		return nil, err
	}
	if err := theSpawner.start(cmd); err != nil {
		outFile.Close()
		errFile.Close()
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	p.cmd = cmd
	p.PID = cmd.Process.Pid
	p.readers.Add(2)
	go p.pump(outPipe, outFile, onStdout)
	go p.pump(errPipe, errFile, onStderr)
	go func() {
		p.readers.Wait() // Wait closes the pipes: read them to the end first
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pump copies r to f line by line, calling fn with each line.
func (p *Proc) pump(r io.Reader, f *os.File, fn func(string)) {
	defer p.readers.Done()
	defer f.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	w := bufio.NewWriter(f)
	defer w.Flush()
	for sc.Scan() {
		line := sc.Text()
		w.WriteString(line)
		w.WriteByte('\n')
		if fn != nil {
			fn(line)
		}
	}
	io.Copy(io.Discard, r) // a line over 1 MiB: keep draining
}

// Exited is closed when the process has ended.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process is still alive.
func (p *Proc) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM to the process (by its PID), waits up to grace for it
// to exit, then sends SIGKILL. It returns the exit error of a process that
// did not stop cleanly on SIGTERM, nil otherwise.
func (p *Proc) Stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.PID)
	}
	return fmt.Errorf("%s (pid %d) ignored SIGTERM for %s and was killed", p.Name, p.PID, grace)
}

// Tail returns the last n lines of the process's stderr log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.StderrLog)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitLine waits for found to deliver, for the process to exit, or for
// the timeout, whichever is first.
func waitLine[T any](ctx context.Context, p *Proc, found <-chan T, timeout time.Duration, what string) (T, error) {
	var zero T
	select {
	case v := <-found:
		return v, nil
	case <-p.exited:
		// The line may have come just before the exit.
		select {
		case v := <-found:
			return v, nil
		default:
		}
		return zero, fmt.Errorf("%s exited (%v) before %s; its stderr ends:\n%s", p.Name, p.waitErr, what, p.Tail(15))
	case <-time.After(timeout):
		return zero, fmt.Errorf("%s did not report %s within %s; its stderr ends:\n%s", p.Name, what, timeout, p.Tail(15))
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Procs is the set of processes a run started, stopped together.
type Procs struct {
	mu    sync.Mutex
	procs []*Proc
}

// Add registers p.
func (ps *Procs) Add(p *Proc) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.procs = append(ps.procs, p)
}

// Info lists every process registered so far.
func (ps *Procs) Info() []ProcInfo {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []ProcInfo
	for _, p := range ps.procs {
		out = append(out, ProcInfo{Name: p.Name, PID: p.PID, Args: p.Args})
	}
	return out
}

// StopAll stops every registered process, the last started first.
func (ps *Procs) StopAll(grace time.Duration) error {
	ps.mu.Lock()
	procs := ps.procs
	ps.procs = nil
	ps.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(grace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
