// Package pgtest starts a throwaway PostgreSQL server for tests: initdb in
// a new directory, postgres on a free loopback port, stopped and removed
// when the test ends. No mock: the server is the one Debian ships
// ("make postgres" installs it when missing).
//
//	srv := pgtest.Start(t)
//	pool, err := pgxpool.New(ctx, srv.DSN("verifyd"))
//
// The binaries are found in $VERIFYD_PG_BIN, on PATH, or in Debian's
// /usr/lib/postgresql/<version>/bin (the highest version). Without them a
// test is skipped, or fails when VERIFYD_PG_TESTS=require (make test sets
// it, so CI never passes by skipping). PostgreSQL refuses to run as root:
// as root, the server runs as the "postgres" user (the package's), or
// "nobody".
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL server.
type Server struct {
	// Port is its TCP port on 127.0.0.1.
	Port int
	// Dir holds its data directory and its socket; removed by Stop.
	Dir string

	bin      string
	settings []string // more -c name=value
	cred     *syscall.Credential
	cmd      *exec.Cmd
	done     chan struct{}
	log      *lockedBuffer

	mu      sync.Mutex
	stopped bool
}

// Superuser is the role initdb creates; it authenticates by trust on
// loopback only.
const Superuser = "verifyd"

// DSN is a connection string for database db on the server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, s.Port, db)
}

// Start starts a server for t and stops it when t ends. It skips t when no
// PostgreSQL is installed, unless VERIFYD_PG_TESTS=require.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartIn(t, "")
}

// StartIn is Start with the server's directory (data, socket) made in
// parent: a file system the test controls, such as a size-limited tmpfs
// ("": the system's temporary directory).
func StartIn(t testing.TB, parent string) *Server {
	t.Helper()
	s, err := start(findOrSkip(t), parent)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s.stopAtEnd(t)
	return s
}

// Running reports whether the server's postmaster is still running (a
// server may stop by itself: a PANIC it cannot recover from).
func (s *Server) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Launch starts a server outside a test (verifybench's fleet scenario);
// the caller stops it with Stop. Each of settings is a "name=value" of
// the server's configuration (postgres -c), such as
// "shared_preload_libraries=pg_stat_statements".
func Launch(settings ...string) (*Server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w (make postgres installs it)", err)
	}
	return start(bin, "", settings...)
}

// PID is the postmaster's process id: its children are the server's
// other processes.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// FindBin returns the directory of initdb and postgres.
func FindBin() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres", "pg_ctl"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("VERIFYD_PG_BIN"); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("VERIFYD_PG_BIN=%s has no initdb, postgres and pg_ctl", d)
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		// A link on PATH (/usr/local/bin/postgres) to a package's
		// binary: its directory has the other tools (pg_basebackup,
		// pg_rewind) too.
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres)")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// runAs is the account the server runs under: the current one, or as root
// "postgres" (Debian's package creates it) or "nobody".
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user to run the server as")
}

func start(bin, parent string, settings ...string) (*Server, error) {
	return startInit(bin, parent, nil, nil, settings...)
}

// startInit is start with more arguments of initdb, and conf, lines
// added to postgresql.conf (settings that hold also for a process the
// server's tools start without the -c settings, such as pg_rewind's).
func startInit(bin, parent string, initArgs, conf []string, settings ...string) (*Server, error) {
	s, err := newServer(bin, parent, settings)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(s.Dir, "data")
	initdb := s.command("initdb", append([]string{"-D", data, "-U", Superuser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"}, initArgs...)...)
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(s.Dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if len(conf) > 0 {
		f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("\n" + strings.Join(conf, "\n") + "\n")
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			os.RemoveAll(s.Dir)
			return nil, err
		}
	}
	if err := s.listen(); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	return s, nil
}

// newServer makes a server's directory, with an empty data directory,
// in parent, both the server account's.
func newServer(bin, parent string, settings []string) (*Server, error) {
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: its parents are 0700 and root's, which the server's
	// account could not enter.
	dir, err := os.MkdirTemp(parent, "verifyd-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin, settings: settings, cred: cred, done: make(chan struct{}), log: &lockedBuffer{}}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return fail(err)
	}
	if cred != nil {
		for _, p := range []string{dir, data} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return fail(err)
			}
		}
	}
	return s, nil
}

// listen starts the server on a free port: another process taking it
// meanwhile makes the start fail, and it is tried again.
func (s *Server) listen() error {
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.Port = port
		err = s.run(filepath.Join(s.Dir, "data"))
		if err == nil {
			return nil
		}
		if attempt == 2 {
			return err
		}
		s.done = make(chan struct{})
	}
}

// run starts postgres on s.Port and waits until it takes connections.
func (s *Server) run(data string) error {
	args := []string{"-D", data,
		"-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + s.Dir,
		"-c", "max_connections=200",
		"-c", "log_min_messages=warning"}
	for _, kv := range s.settings {
		args = append(args, "-c", kv)
	}
	s.cmd = s.command("postgres", args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		close(s.done)
		return fmt.Errorf("postgres: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	// Readiness through the unix socket in s.Dir: only this server has it
	// (another test's server on the same port would answer over TCP).
	// A server that could not bind its TCP port exits, and is retried.
	socket := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", s.Dir, s.Port, Superuser)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, socket)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited: %s", s.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			killGroup(s.cmd)
			<-s.done
			return fmt.Errorf("postgres took no connection within a minute: %v\n%s", err, s.log.String())
		}
	}
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.Dir = s.Dir
	cmd.SysProcAttr = procAttr(s.cred)
	return cmd
}

// CreateDatabase creates database name.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// Kill stops the server at once (SIGKILL), as a crash would; its data
// stays for Restart.
func (s *Server) Kill() {
	killGroup(s.cmd)
	<-s.done
}

// Restart starts the server again on its data directory and port, after
// Kill. The killed server's processes may hold its shared memory for a
// moment: a start that fails is tried again, up to ten times.
func (s *Server) Restart() error {
	var err error
	for range 10 {
		s.done = make(chan struct{})
		if err = s.run(filepath.Join(s.Dir, "data")); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// Stop shuts the server down (a fast shutdown: SIGINT) and removes its
// directory.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	var err error
	select {
	case <-s.done:
	default:
		if !s.signalAndWait(os.Interrupt) {
			err = errors.New("postgres did not shut down within 30 s; killed")
		}
	}
	return errors.Join(err, os.RemoveAll(s.Dir))
}

// signalAndWait sends sig to the postmaster and waits for it to exit; a
// server still running 30 s later is killed, and it returns false.
func (s *Server) signalAndWait(sig os.Signal) bool {
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
		return true
	case <-time.After(30 * time.Second):
		killGroup(s.cmd)
		<-s.done
		return false
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer collects a process's output for error messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
