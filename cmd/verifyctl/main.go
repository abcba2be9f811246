// Command verifyctl is verifyd's operator CLI. It talks to the admin API
// (package server/admin) over verifyd's admin unix socket, and verifies
// signed receipts.
//
//	verifyctl [-socket PATH] [-config FILE] [-json] <group> <command> [flags] [args]
//
// It finds the socket in this order: -socket; $VERIFYD_ADMIN_SOCKET;
// admin.socket of the verifyd configuration (-config, default
// /etc/verifyd/verifyd.toml when it exists, else verifyd's embedded
// defaults), falling back to /run/verifyd/admin.sock, where the systemd
// unit's RuntimeDirectory puts it, when the configuration names no socket
// and that one exists.
//
// Output is a human-readable table, or JSON with -json. Exit status: 0
// success; 1 failure (verifyd refused, the socket is unreachable, a receipt
// does not verify); 2 usage error. README.md lists every command.
//
// Global flags may also follow the command. Flags and arguments of a
// command may come in any order ("keys mint ID --label L"); "--" ends the
// flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one verifyctl command. A later feature adds its commands to
// the commands table (commands.go) and its client methods to adminapi.
type command struct {
	group, name string
	// synopsis is the arguments and flags, for usage lines.
	synopsis string
	summary  string
	run      func(c *cli, args []string) error
}

// cli is one run of verifyctl: the global flags and the streams.
type cli struct {
	socket     string
	configPath string
	json       bool
	timeout    time.Duration

	stdin          io.Reader
	stdout, stderr io.Writer

	ctx          context.Context
	client       *adminapi.Client
	socketSource string
}

// usageError is a mistake in the command line: exit status 2. An empty
// message means the flag package already reported it.
type usageError struct {
	msg   string
	usage string // the command's usage line, printed after msg
}

func (e *usageError) Error() string { return e.msg }

// failure is a failure already reported on stdout or stderr (a receipt
// that does not verify): exit status 1, nothing more to print.
type failure struct{}

func (failure) Error() string { return "failed" }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("verifyctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.globalFlags(fs)
	fs.Usage = func() { c.usage(stderr) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	args = fs.Args()
	if len(args) == 0 {
		c.usage(stderr)
		return exitUsage
	}
	if args[0] == "help" {
		c.usage(stdout)
		return exitOK
	}
	cmd, err := lookup(args)
	if err != nil {
		return c.exit(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c.ctx = ctx
	rest := args[1:]
	if cmd.name != "" {
		rest = args[2:]
	}
	err = cmd.run(c, rest)
	if c.client != nil {
		c.client.Close()
	}
	return c.exit(err)
}

// exit reports err and returns the exit status.
func (c *cli) exit(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		if ue.msg != "" {
			fmt.Fprintf(c.stderr, "verifyctl: %s\n", ue.msg)
		}
		if ue.usage != "" {
			fmt.Fprintf(c.stderr, "usage: %s\n", ue.usage)
		}
		return exitUsage
	case errors.Is(err, failure{}):
		return exitFailure
	}
	fmt.Fprintf(c.stderr, "verifyctl: %v\n", err)
	return exitFailure
}

// globalFlags defines the flags every command also takes.
func (c *cli) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.socket, "socket", c.socket, "admin socket `path` (default: $VERIFYD_ADMIN_SOCKET, else admin.socket of the configuration)")
	fs.StringVar(&c.configPath, "config", c.configPath, "verifyd configuration `file` to read admin.socket from (default /etc/verifyd/verifyd.toml if it exists)")
	fs.BoolVar(&c.json, "json", c.json, "print JSON instead of tables")
	fs.DurationVar(&c.timeout, "timeout", orDefault(c.timeout, time.Minute), "give up on verifyd after this `duration`")
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// lookup finds the command of args[0] and args[1].
func lookup(args []string) (*command, error) {
	group := args[0]
	var inGroup []string
	for i := range commands {
		if commands[i].group == group {
			if commands[i].name == "" {
				return &commands[i], nil // a command of one word: verifyctl backup DIR
			}
			inGroup = append(inGroup, "  "+commands[i].usageLine())
			if len(args) > 1 && commands[i].name == args[1] {
				return &commands[i], nil
			}
		}
	}
	if len(inGroup) == 0 {
		return nil, &usageError{msg: fmt.Sprintf("unknown command %q (verifyctl help lists them)", group)}
	}
	msg := fmt.Sprintf("%s needs a command:\n%s", group, strings.Join(inGroup, "\n"))
	if len(args) > 1 {
		msg = fmt.Sprintf("unknown command %q %q; %s has:\n%s", group, args[1], group, strings.Join(inGroup, "\n"))
	}
	return nil, &usageError{msg: msg}
}

func (cmd *command) usageLine() string {
	s := "verifyctl " + cmd.group
	if cmd.name != "" {
		s += " " + cmd.name
	}
	if cmd.synopsis != "" {
		s += " " + cmd.synopsis
	}
	return s
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `verifyctl: operate verifyd over its admin socket, and verify receipts.

usage: verifyctl [-socket PATH] [-config FILE] [-json] [-timeout D] <group> <command> [flags] [args]

commands:
`)
	groups := map[string][]*command{}
	var order []string
	for i := range commands {
		g := commands[i].group
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], &commands[i])
	}
	for _, g := range order {
		for _, cmd := range groups[g] {
			fmt.Fprintf(w, "  %s\n        %s\n", cmd.usageLine(), cmd.summary)
		}
	}
	fmt.Fprint(w, `
global flags (also accepted after the command):
`)
	fs := flag.NewFlagSet("verifyctl", flag.ContinueOnError)
	(&cli{}).globalFlags(fs) // defaults, not this run's values
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, `
exit status: 0 ok, 1 failure, 2 usage error.
`)
}

// flagSet starts the flags of cmd: its own and the global ones.
func (c *cli) flagSet(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("verifyctl "+cmd, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	c.globalFlags(fs)
	return fs
}

// parse parses args, flags and arguments in any order, and checks that
// there are between min and max arguments (max < 0: no limit).
func (c *cli) parse(fs *flag.FlagSet, cmd *command, args []string, min, max int) ([]string, error) {
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: %s\n", cmd.usageLine())
		var own []string
		fs.VisitAll(func(f *flag.Flag) {
			switch f.Name {
			case "socket", "config", "json", "timeout":
			default:
				own = append(own, f.Name)
			}
		})
		if len(own) > 0 {
			sort.Strings(own)
			sub := flag.NewFlagSet("", flag.ContinueOnError)
			for _, n := range own {
				f := fs.Lookup(n)
				sub.Var(f.Value, f.Name, f.Usage)
			}
			sub.SetOutput(c.stderr)
			sub.PrintDefaults()
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{}
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < min:
		return nil, &usageError{msg: "too few arguments", usage: cmd.usageLine()}
	case max >= 0 && len(pos) > max:
		return nil, &usageError{msg: fmt.Sprintf("unexpected argument %q", pos[max]), usage: cmd.usageLine()}
	}
	return pos, nil
}

// call runs f with the admin client and the command's deadline.
func (c *cli) call(f func(ctx context.Context, ac *adminapi.Client) error) error {
	ac, err := c.adminClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	err = f(ctx, ac)
	var ce *adminapi.ConnError
	if errors.As(err, &ce) && c.socketSource != "" {
		return fmt.Errorf("%w\n  (the socket is %s; give -socket PATH or set $VERIFYD_ADMIN_SOCKET to use another)", err, c.socketSource)
	}
	return err
}

func (c *cli) adminClient() (*adminapi.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	path, source, err := findSocket(c.socket, c.configPath)
	if err != nil {
		return nil, err
	}
	c.socketSource = source
	c.client = adminapi.NewClient(path)
	return c.client, nil
}
