package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
	"github.com/verifyd/verifyd/storage/postgres"
)

// The fleet's database (docs/fleet.md): these commands talk to PostgreSQL
// directly, not to a verifyd's admin socket.

func init() {
	commands = append(commands,
		command{"db", "migrate", "[--dsn DSN]", "apply to a fleet's PostgreSQL database the schema versions it lacks (DSN: --dsn or $VERIFYD_PG_DSN)", dbMigrate},
		command{"db", "status", "[--dsn DSN]", "show a fleet database's schema version and whether this verifyctl's verifyd can use it (exit status 1 when it cannot)", dbStatus},
	)
}

// PGDSNEnv names the environment variable with the database's DSN.
const PGDSNEnv = "VERIFYD_PG_DSN"

// withDB runs f with a pool on the database the command names (--dsn or
// $VERIFYD_PG_DSN), within the command's timeout.
func (c *cli) withDB(group, name string, args []string, f func(context.Context, *pgxpool.Pool) error) error {
	cmd := this(group, name)
	fs := c.flagSet(group + " " + name)
	dsn := fs.String("dsn", os.Getenv(PGDSNEnv), "the database's `DSN` (postgres://user@host:port/db?sslmode=…)")
	if _, err := c.parse(fs, cmd, args, 0, 0); err != nil {
		return err
	}
	if *dsn == "" {
		return &usageError{msg: "--dsn or $" + PGDSNEnv + " is required", usage: cmd.usageLine()}
	}
	cfg, err := pgxpool.ParseConfig(*dsn)
	if err != nil {
		return &usageError{msg: "the DSN does not parse: " + err.Error(), usage: cmd.usageLine()}
	}
	pool, err := pgxpool.NewWithConfig(c.ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	return f(ctx, pool)
}

func dbMigrate(c *cli, args []string) error {
	return c.withDB("db", "migrate", args, func(ctx context.Context, pool *pgxpool.Pool) error {
		res, err := postgres.MigrateReport(ctx, pool)
		if err != nil {
			return err
		}
		done := res.Applied
		have, known, err := postgres.Versions(ctx, pool)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(map[string]any{"applied": done, "recorded": res.Recorded, "version": last(have), "known": known})
		}
		applied := "none (already up to date)"
		if len(done) > 0 {
			applied = strings.Trim(fmt.Sprint(done), "[]")
		}
		kv := []string{"applied", applied}
		if len(res.Recorded) > 0 {
			// Rows of schema_migrations deleted while their objects
			// stayed: written again, their SQL not run.
			kv = append(kv, "recorded (objects present, row was missing)", strings.Trim(fmt.Sprint(res.Recorded), "[]"))
		}
		kv = append(kv, "version", fmt.Sprint(last(have)), "this verifyctl knows", fmt.Sprint(known))
		return c.printKV(kv...)
	})
}

func dbStatus(c *cli, args []string) error {
	return c.withDB("db", "status", args, func(ctx context.Context, pool *pgxpool.Pool) error {
		have, known, err := postgres.Versions(ctx, pool)
		if err != nil {
			return err
		}
		usable := "yes"
		if err := postgres.Check(ctx, pool); err != nil {
			usable = "no: " + strings.TrimPrefix(err.Error(), "postgres: schema: ")
		}
		if c.json {
			err = c.printJSON(map[string]any{"version": last(have), "known": known, "usable": usable == "yes", "detail": usable})
		} else {
			err = c.printKV("version", fmt.Sprint(last(have)), "this verifyctl knows", fmt.Sprint(known), "usable", usable)
		}
		if err == nil && usable != "yes" {
			// Scripts and health checks read the exit status: a
			// schema this binary cannot use is a failure.
			return failure{}
		}
		return err
	})
}

func last(vs []int) int {
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1]
}

func init() {
	commands = append(commands,
		command{"db", "export", "--data-dir DIR [--out FILE]", "write a stopped single box's shared state (its data_dir) as JSON lines, to move it into a fleet (default: standard output)", dbExport},
		command{"db", "import", "[--dsn DSN] [--in FILE]", "write an export into an empty fleet database, in one transaction, and check every account's ledger (default: standard input)", dbImport},
	)
}

func dbExport(c *cli, args []string) error {
	cmd := this("db", "export")
	flags := c.flagSet("db export")
	dir := flags.String("data-dir", "", "the stopped box's `data_dir`")
	out := flags.String("out", "", "the `file` to write (default: standard output)")
	if _, err := c.parse(flags, cmd, args, 0, 0); err != nil {
		return err
	}
	if *dir == "" {
		return &usageError{msg: "--data-dir is required", usage: cmd.usageLine()}
	}
	db, err := pebble.Open(filepath.Join(*dir, "db"), pebble.Options{PurgeInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("cannot open %s (stop the box's verifyd first): %w", *dir, err)
	}
	defer db.Close()
	w := c.stdout
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	counts := map[string]int{}
	write := func(r storage.Record) error {
		counts[r.Type]++
		return enc.Encode(r)
	}
	if err := db.Export(write); err != nil {
		return err
	}
	keys, err := os.ReadFile(filepath.Join(*dir, "signing", receipt.KeysFileName))
	switch {
	case err == nil:
		if err := write(storage.Record{Type: storage.RecSigningKeys, Value: keys}); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if f, ok := w.(*os.File); ok && *out != "" {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	// The export is on standard output: the counts go to standard error.
	return c.printCounts(c.stderr, counts)
}

func dbImport(c *cli, args []string) error {
	cmd := this("db", "import")
	flags := c.flagSet("db import")
	dsn := flags.String("dsn", os.Getenv(PGDSNEnv), "the fleet database's `DSN`")
	in := flags.String("in", "", "the export `file` (default: standard input)")
	if _, err := c.parse(flags, cmd, args, 0, 0); err != nil {
		return err
	}
	if *dsn == "" {
		return &usageError{msg: "--dsn or $" + PGDSNEnv + " is required", usage: cmd.usageLine()}
	}
	r := c.stdin
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	db, err := postgres.Open(c.ctx, *dsn, postgres.Options{Box: "verifyctl-import", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer db.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	stats, err := db.Import(func() (storage.Record, bool, error) {
		var rec storage.Record
		if err := dec.Decode(&rec); errors.Is(err, io.EOF) {
			return rec, false, nil
		} else if err != nil {
			return rec, false, fmt.Errorf("the export does not read: %w", err)
		}
		return rec, true, nil
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(stats)
	}
	return c.printCounts(c.stdout, stats)
}

// printCounts prints records per type to w, in the order of an export.
func (c *cli) printCounts(w io.Writer, counts map[string]int) error {
	var kv []string
	for _, t := range []string{storage.RecAccount, storage.RecKey, storage.RecEntry, storage.RecResult, storage.RecCache, storage.RecIdem,
		storage.RecJob, storage.RecOutbox, storage.RecDeadLetter, storage.RecHookLast, storage.RecUser, storage.RecInvite,
		storage.RecSession, storage.RecSecret, storage.RecSigningKeys} {
		kv = append(kv, t, fmt.Sprint(counts[t]))
	}
	return c.printKVTo(w, kv...)
}
