package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Streaming replication, for failover tests: a primary started with
// StartWith (data checksums, which pg_rewind needs of the server it
// rewinds), a standby made from it with StartStandby (pg_basebackup -R:
// a copy of its data that streams its WAL), StopImmediate (pg_ctl stop -m
// immediate: the postmaster told to quit without a checkpoint, as a
// crash), Promote (pg_promote) and Rewind (pg_rewind -R: the old primary
// made a standby of the new one).

// StartWith is Start with more settings of the server (name=value, as
// postgres -c), data checksums, which pg_rewind needs of the server it
// rewinds, and 512 MB of WAL kept (wal_keep_size), which pg_rewind reads
// back to the two servers' last common checkpoint. Both are in the data
// directory, not -c settings: pg_rewind's own crash recovery of its
// target runs without those (it would record wal_log_hints off, and
// recycle the WAL it then needs).
func StartWith(t testing.TB, settings ...string) *Server {
	t.Helper()
	bin := findOrSkip(t)
	s, err := startInit(bin, "", []string{"--data-checksums"}, []string{"wal_keep_size = '512MB'"}, settings...)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s.stopAtEnd(t)
	return s
}

func findOrSkip(t testing.TB) string {
	t.Helper()
	bin, err := FindBin()
	if err != nil {
		if os.Getenv("VERIFYD_PG_TESTS") == "require" {
			t.Fatalf("pgtest: %v (make postgres installs it)", err)
		}
		t.Skipf("pgtest: %v (make postgres installs it; VERIFYD_PG_TESTS=require fails instead)", err)
	}
	return bin
}

func (s *Server) stopAtEnd(t testing.TB) {
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
}

// StartStandby starts a standby of the primary at source ("host:port":
// the primary's 127.0.0.1 and Port, or a proxy in front of it, which its
// WAL then streams through): pg_basebackup of the primary's data with
// its WAL, and the settings to follow it (-R: standby.signal and
// primary_conninfo naming source). settings are the standby's own, as
// StartWith's.
func StartStandby(t testing.TB, source string, settings ...string) *Server {
	t.Helper()
	bin := findOrSkip(t)
	s, err := newServer(bin, "", settings)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	host, port, err := net.SplitHostPort(source)
	if err != nil {
		os.RemoveAll(s.Dir)
		t.Fatalf("pgtest: %v", err)
	}
	bb := s.command("pg_basebackup", "-D", filepath.Join(s.Dir, "data"), "-h", host, "-p", port, "-U", Superuser,
		"-X", "stream", "-R", "-c", "fast", "--no-sync")
	if out, err := bb.CombinedOutput(); err != nil {
		os.RemoveAll(s.Dir)
		t.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	if err := s.listen(); err != nil {
		os.RemoveAll(s.Dir)
		t.Fatalf("pgtest: the standby: %v", err)
	}
	s.stopAtEnd(t)
	return s
}

// Addr is the server's "127.0.0.1:port".
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// StopImmediate stops the server as pg_ctl stop -m immediate does
// (SIGQUIT to the postmaster: every process quits at once, no
// checkpoint; the next start recovers from the WAL), and waits for it.
func (s *Server) StopImmediate() { s.signalAndWait(syscall.SIGQUIT) }

// Promote makes a standby the primary (pg_promote, waiting until it
// takes writes).
func (s *Server) Promote(ctx context.Context) error {
	conn, err := s.socket(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, 60)`).Scan(&ok); err != nil {
		return fmt.Errorf("pg_promote: %w", err)
	}
	if !ok {
		return errors.New("pg_promote: not promoted within 60 s")
	}
	return nil
}

// Rewind makes s, a primary stopped by StopImmediate, a standby of the
// primary at source ("host:port"): pg_rewind -R (its data brought back
// to where the two timelines part, then following source), and starts
// it again on its port.
func (s *Server) Rewind(source string) error {
	host, port, err := net.SplitHostPort(source)
	if err != nil {
		return err
	}
	// A standby just promoted has not yet written its new timeline to
	// its control file, where pg_rewind reads it (it would find both on
	// timeline 1 and rewind nothing): a checkpoint writes it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s dbname=postgres sslmode=disable", host, port, Superuser))
	if err != nil {
		return err
	}
	_, err = src.Exec(ctx, `CHECKPOINT`)
	src.Close(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint of the new primary: %w", err)
	}
	rw := s.command("pg_rewind", "--target-pgdata="+filepath.Join(s.Dir, "data"),
		fmt.Sprintf("--source-server=host=%s port=%s user=%s dbname=postgres sslmode=disable", host, port, Superuser),
		"-R", "--no-sync")
	if out, err := rw.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_rewind: %v\n%s", err, out)
	}
	return s.Restart()
}

// Replicas is the standbys streaming from the primary s: each one's
// state and sync_state (pg_stat_replication).
func (s *Server) Replicas(ctx context.Context) ([][2]string, error) {
	conn, err := s.socket(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT state, sync_state FROM pg_stat_replication`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var st [2]string
		err := r.Scan(&st[0], &st[1])
		return st, err
	})
}

// WaitStreaming waits until n standbys stream from the primary s (and,
// with sync, that one of them is synchronous).
func (s *Server) WaitStreaming(ctx context.Context, n int, sync bool) error {
	for {
		rs, err := s.Replicas(ctx)
		streaming, syncs := 0, 0
		for _, r := range rs {
			if r[0] == "streaming" {
				streaming++
				if r[1] == "sync" {
					syncs++
				}
			}
		}
		if err == nil && streaming >= n && (!sync || syncs > 0) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d standbys streaming (%v, %v): %w", streaming, rs, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Set changes a setting of the running server (ALTER SYSTEM, then a
// reload): synchronous_standby_names, for one, once a standby streams
// (set before, the primary's commits would wait for one forever). A
// standby made after copies it.
func (s *Server) Set(ctx context.Context, name, value string) error {
	conn, err := s.socket(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = %s", pgx.Identifier{name}.Sanitize(), quoteLiteral(value))); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `SELECT pg_reload_conf()`)
	return err
}

func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// socket connects to the server's postgres database through its unix
// socket.
func (s *Server) socket(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", s.Dir, s.Port, Superuser))
}

// Log is what the server wrote to its standard output and error (the
// first MiB), for a test's failure message.
func (s *Server) Log() string { return s.log.String() }
