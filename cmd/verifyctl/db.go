package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/storage/postgres"
)

// The fleet's database (docs/fleet.md): these commands talk to PostgreSQL
// directly, not to a verifyd's admin socket.

func init() {
	commands = append(commands,
		command{"db", "migrate", "[--dsn DSN]", "apply to a fleet's PostgreSQL database the schema versions it lacks (DSN: --dsn or $VERIFYD_PG_DSN)", dbMigrate},
		command{"db", "status", "[--dsn DSN]", "show a fleet database's schema version and whether this verifyctl's verifyd can use it", dbStatus},
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
		done, err := postgres.Migrate(ctx, pool)
		if err != nil {
			return err
		}
		have, known, err := postgres.Versions(ctx, pool)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(map[string]any{"applied": done, "version": last(have), "known": known})
		}
		applied := "none (already up to date)"
		if len(done) > 0 {
			applied = strings.Trim(fmt.Sprint(done), "[]")
		}
		return c.printKV("applied", applied, "version", fmt.Sprint(last(have)), "this verifyctl knows", fmt.Sprint(known))
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
			return c.printJSON(map[string]any{"version": last(have), "known": known, "usable": usable == "yes", "detail": usable})
		}
		return c.printKV("version", fmt.Sprint(last(have)), "this verifyctl knows", fmt.Sprint(known), "usable", usable)
	})
}

func last(vs []int) int {
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1]
}
