// Package mtatest runs real mail servers for tests: Postfix, Exim 4 and
// OpenSMTPD, and the postgrey greylisting policy server, from Debian's own
// packages. No mock: the replies a test sees are the ones the Internet's
// mail servers give, stock text and all.
//
//	mx := mtatest.Postfix(t, mtatest.Config{
//		Addr:       netip.MustParseAddrPort("127.35.1.1:25"),
//		Hostname:   "mx.example.test",
//		Nameserver: netip.MustParseAddr("127.35.0.53"), // the test's DNS on port 53
//		Users:      []string{"alice"},
//		Append: map[string]string{"/etc/postfix/main.cf": "mydestination = $myhostname, example.test\n"},
//	})
//	// mx.Addr answers SMTP until the test ends.
//
// # The packages
//
// The three MTAs conflict with one another in Debian (each provides
// mail-transport-agent), so none is installed: "make mta" runs install.sh,
// which fetches postfix, exim4-base, exim4-daemon-light, exim4-config,
// opensmtpd and postgrey with apt-get download and unpacks each with dpkg -x
// into $VERIFYD_MTA_ROOT (default $HOME/.cache/verifyd/mta), one directory
// per MTA. No maintainer script runs, no account is created, no file of the
// machine changes; the libraries they link (libidn12, Perl modules) are
// installed with apt-get, as they start no service.
//
// Without those trees, or without root, a test is skipped, or fails when
// VERIFYD_MTA_TESTS=require ("make test" sets it, so CI never passes by
// skipping).
//
// # How a daemon runs
//
// Each daemon runs as the package installed it would, at the paths
// compiled into it, in namespaces of its own that leave the machine as it
// was:
//
//  1. Start makes a directory (Daemon.Dir) and writes there the files the
//     daemon's /etc gets: the machine's passwd and group with the accounts
//     the package's maintainer scripts would create (postfix and postdrop,
//     Debian-exim, opensmtpd and opensmtpq, postgrey) and the mail users of
//     Config.Users; a resolv.conf naming Config.Nameserver only, a hosts
//     file with localhost only; mailname and the hostname; /etc/aliases as
//     the package's postinst writes it; the MTA's configuration (the
//     defaults below); then Config.Files and Config.Append (/var and /home
//     too).
//  2. It runs "unshare --mount --uts --pid --fork --mount-proc --kill-child
//     sh prelude.sh". In the new mount namespace the prelude lays overlays
//     on /etc, /usr, /var and /home: the machine's own directories at the
//     bottom, the package's tree above them, and on top a writable layer in
//     Dir that holds the test's files (/usr is read-only). It mounts a
//     tmpfs on /run, sets the host name in the new UTS namespace, prepares
//     what the postinst would (queue and log directories, aliases
//     databases, Exim's generated configuration), runs Config.Setup, and
//     runs the daemon in the foreground. The shell stays as process 1 of
//     the new PID namespace and waits for it.
//  3. Start waits until the daemon listens on Config.Addr (SMTP: until it
//     greets), and fails the test with the daemon's log when it exits
//     first.
//  4. At cleanup (or Stop) the namespace's process 1 gets SIGKILL: the
//     kernel then kills every process of its PID namespace, the mounts
//     vanish with it, and Dir is removed. Should the test binary die
//     without its cleanup, unshare, which is all Start started, dies with
//     it (Pdeathsig) and kills process 1 (--kill-child), with the same
//     effect. Nothing else is ever signalled.
//
// Every daemon binds only the loopback address it is given, and looks
// names up only at Config.Nameserver: nothing reaches another address.
//
// # The defaults of each MTA
//
// Postfix: /etc/postfix/main.cf is Debian's (main.cf.debian) with the
// answers of the "Internet Site" install (myhostname, alias_maps,
// mydestination = $myhostname, localhost, recipient_delimiter, Debian's
// smtpd_relay_restrictions), except mynetworks = 127.0.0.1/32: the
// package's 127.0.0.0/8 would trust every client of a loopback world, the
// prober too. master.cf is Debian's, cut to the services an SMTP server
// that takes no mail needs (smtpd on Config.Addr, cleanup, qmgr,
// trivial-rewrite, proxymap, anvil, postlogd), chroot n; Postfix's log
// goes to standard output (maillog_file = /dev/stdout, "master -d").
// Postfix refuses an inet_interfaces that is no interface's address, so
// inet_interfaces stays 127.0.0.1 and master.cf binds Config.Addr.
//
// Exim: Debian's split configuration, generated at start by
// update-exim4.conf from /etc/exim4/update-exim4.conf.conf as debconf's
// "internet site" answers write it (dc_local_interfaces = Config.Addr's
// address, dc_other_hostnames empty: append a dc_other_hostnames line to
// add local domains), and the conf.d files of the package, to which a test
// adds its own (a router file, CHECK_RCPT_LOCAL_ACL_FILE in a
// conf.d/main/000_localmacros). "exim4 -bdf -oX port".
//
// OpenSMTPD: Debian's /etc/smtpd.conf with "listen on" Config.Addr instead
// of localhost; append "match" rules for the test's domains. "smtpd -d".
//
// postgrey: "postgrey --inet=addr:port" with the package's whitelists;
// Config.Args adds --delay, --exim and the like.
package mtatest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Kind names a daemon the package runs.
type Kind string

// Kinds.
const (
	KindPostfix   Kind = "postfix"
	KindExim      Kind = "exim"
	KindOpenSMTPD Kind = "opensmtpd"
	KindPostgrey  Kind = "postgrey"
)

// Config says how to run one daemon.
type Config struct {
	// Addr is the loopback address and TCP port the daemon listens on,
	// and the only one: any 127.x.y.z can be bound without configuring
	// an interface. Required.
	Addr netip.AddrPort
	// Hostname is the host's name: the host name of its UTS namespace,
	// /etc/mailname, and so the name in its greeting (Postfix's
	// myhostname, Exim's primary_hostname, OpenSMTPD's). Default
	// "mx.<kind>.test".
	Hostname string
	// Nameserver is a loopback address whose port 53 answers DNS: the
	// only nameserver of the daemon's /etc/resolv.conf. The MTAs look up
	// the client's name and the DNS lists there. Required for the MTAs;
	// postgrey looks nothing up.
	Nameserver netip.Addr
	// Users are local mail accounts (login names): each gets a user and a
	// group of its name in /etc/passwd and /etc/group, and a home
	// directory /home/<name>. None may be an account of the machine
	// (root, nobody, …): the daemon's passwd holds the machine's too.
	Users []string
	// Files are written into the daemon's file system before it starts,
	// by absolute path under /etc, /var or /home ("/etc/postfix/vmailbox",
	// "/etc/exim4/conf.d/router/350_exim4-config_vdom"); each replaces the
	// default of the same path, if any.
	Files map[string]string
	// Append adds text at the end of a file, by absolute path, after
	// Files: to the default when the test gave none ("/etc/postfix/main.cf":
	// later settings win; "/etc/smtpd.conf": further rules).
	Append map[string]string
	// Setup are shell commands run as root in the daemon's namespaces once
	// its files are in place and before it starts ("postmap
	// /etc/postfix/vmailbox"); a failing one fails the start.
	Setup []string
	// Args are further arguments of the daemon's command line (postgrey:
	// "--delay=2", "--exim").
	Args []string
	// StartTimeout bounds the wait for the daemon to listen; default 30 s.
	StartTimeout time.Duration
}

// Daemon is a running daemon.
type Daemon struct {
	// Kind is what runs; Addr where it listens; Hostname its name.
	Kind     Kind
	Addr     netip.AddrPort
	Hostname string
	// Dir holds its files: etc/ (the top of its /etc), up/ (the writable
	// layers of /etc, /var and /home), output.log (its standard output and
	// error), prelude.sh. Removed by Stop.
	Dir string

	cmd    *exec.Cmd
	out    *os.File
	done   chan struct{}
	pidNS  string // "pid:[inode]" of its PID namespace, once known
	initID int    // host PID of its process 1, once known

	mu      sync.Mutex
	stopped bool
}

// Postfix starts Postfix's master daemon (and so smtpd and the services
// it needs) for t; it stops when t ends.
func Postfix(t testing.TB, cfg Config) *Daemon {
	t.Helper()
	return Start(t, KindPostfix, cfg)
}

// Exim starts the Exim 4 daemon (exim4-daemon-light) for t.
func Exim(t testing.TB, cfg Config) *Daemon {
	t.Helper()
	return Start(t, KindExim, cfg)
}

// OpenSMTPD starts OpenSMTPD's smtpd for t.
func OpenSMTPD(t testing.TB, cfg Config) *Daemon {
	t.Helper()
	return Start(t, KindOpenSMTPD, cfg)
}

// Postgrey starts the postgrey policy server for t (Postfix's
// check_policy_service, Exim's readsocket).
func Postgrey(t testing.TB, cfg Config) *Daemon {
	t.Helper()
	return Start(t, KindPostgrey, cfg)
}

// Start starts a daemon of kind k for t and stops it when t ends: on
// failure the test fails with the daemon's log, and a test that fails later
// gets the log too. It skips t when the packages are not unpacked or the
// test is not root, unless VERIFYD_MTA_TESTS=require.
func Start(t testing.TB, k Kind, cfg Config) *Daemon {
	t.Helper()
	root, err := Available()
	if err != nil {
		if os.Getenv("VERIFYD_MTA_TESTS") == "require" {
			t.Fatalf("mtatest: %v (make mta unpacks them)", err)
		}
		t.Skipf("mtatest: %v (make mta unpacks them; VERIFYD_MTA_TESTS=require fails instead)", err)
	}
	d, err := start(root, k, cfg)
	if err != nil {
		t.Fatalf("mtatest: %s on %s: %v", k, cfg.Addr, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mtatest: %s on %s: its log:\n%s", k, d.Addr, tail(d.Log(), 16<<10))
		}
		if err := d.Stop(); err != nil {
			t.Errorf("mtatest: %v", err)
		}
	})
	return d
}

// Root is the directory install.sh unpacks the packages into.
func Root() string {
	if r := os.Getenv("VERIFYD_MTA_ROOT"); r != "" {
		return r
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "verifyd", "mta")
}

// Available returns Root when every package is unpacked there and this
// process can run them (root, unshare); otherwise why not.
func Available() (string, error) {
	root := Root()
	if strings.ContainsAny(root, ",: \t\n") {
		return "", fmt.Errorf("the packages' directory %q has a character mount options cannot carry", root)
	}
	if _, err := os.Stat(filepath.Join(root, "versions")); err != nil {
		return "", fmt.Errorf("the MTA packages of Debian are not unpacked in %s", root)
	}
	for _, k := range []Kind{KindPostfix, KindExim, KindOpenSMTPD, KindPostgrey} {
		if fi, err := os.Stat(filepath.Join(root, string(k), daemonPath[k])); err != nil || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s has no %s", filepath.Join(root, string(k)), daemonPath[k])
		}
	}
	if os.Geteuid() != 0 {
		return "", errors.New("running real MTAs needs root (mount and PID namespaces)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return "", errors.New("no unshare (util-linux)")
	}
	return root, nil
}

// Versions returns the packages unpacked and their versions, one
// "package version" a line.
func Versions() string {
	b, _ := os.ReadFile(filepath.Join(Root(), "versions"))
	return string(b)
}

// daemonPath is each daemon's binary, as the package installs it.
var daemonPath = map[Kind]string{
	KindPostfix:   "usr/lib/postfix/sbin/master",
	KindExim:      "usr/sbin/exim4",
	KindOpenSMTPD: "usr/sbin/smtpd",
	KindPostgrey:  "usr/sbin/postgrey",
}

// systemAccounts are the accounts each package's postinst creates: name,
// home; each has a group of its name. Extra groups follow.
var systemAccounts = map[Kind][][2]string{
	KindPostfix:   {{"postfix", "/var/spool/postfix"}},
	KindExim:      {{"Debian-exim", "/var/spool/exim4"}},
	KindOpenSMTPD: {{"opensmtpd", "/var/lib/opensmtpd/empty"}, {"opensmtpq", "/var/lib/opensmtpd/empty"}},
	KindPostgrey:  {{"postgrey", "/var/lib/postgrey"}},
}

var extraGroups = map[Kind][]string{KindPostfix: {"postdrop"}}

func start(root string, k Kind, cfg Config) (*Daemon, error) {
	if _, ok := daemonPath[k]; !ok {
		return nil, fmt.Errorf("unknown kind %q", k)
	}
	if !cfg.Addr.IsValid() || !cfg.Addr.Addr().Is4() || !cfg.Addr.Addr().IsLoopback() || cfg.Addr.Port() == 0 {
		return nil, fmt.Errorf("addr %s is not an IPv4 loopback address with a port", cfg.Addr)
	}
	if k != KindPostgrey && (!cfg.Nameserver.IsValid() || !cfg.Nameserver.IsLoopback()) {
		return nil, fmt.Errorf("nameserver %s is not a loopback address: an MTA needs the test's DNS", cfg.Nameserver)
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "mx." + string(k) + ".test"
	}
	if strings.ContainsAny(cfg.Hostname, " \t\n'\"\\$`;") {
		return nil, fmt.Errorf("bad hostname %q", cfg.Hostname)
	}
	for _, u := range cfg.Users {
		if u == "" || strings.ContainsAny(u, ": \t\n/'\"\\$`;") {
			return nil, fmt.Errorf("bad user name %q", u)
		}
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	sweepOnce.Do(sweepStale)
	// Not t.TempDir: the daemons' accounts must reach their files, and
	// its name must carry no character an overlay's options cannot.
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	d := &Daemon{Kind: k, Addr: cfg.Addr, Hostname: cfg.Hostname, Dir: dir, done: make(chan struct{})}
	fail := func(err error) (*Daemon, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(selfID()), 0o644); err != nil {
		return fail(err)
	}
	files, err := d.files(k, cfg)
	if err != nil {
		return fail(err)
	}
	for _, top := range []string{"etc", "var", "home"} {
		for _, sub := range []string{"up", "work"} {
			if err := os.MkdirAll(filepath.Join(dir, sub, top), 0o755); err != nil {
				return fail(err)
			}
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		host, err := d.hostPath(p)
		if err != nil {
			return fail(err)
		}
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(host, []byte(files[p]), 0o644); err != nil {
			return fail(err)
		}
	}
	prelude := d.prelude(root, k, cfg)
	if err := os.WriteFile(filepath.Join(dir, "prelude.sh"), []byte(prelude), 0o644); err != nil {
		return fail(err)
	}
	if d.out, err = os.Create(filepath.Join(dir, "output.log")); err != nil {
		return fail(err)
	}
	d.cmd = exec.Command("unshare", "--mount", "--uts", "--pid", "--fork", "--mount-proc",
		"--propagation", "private", "--kill-child", "/bin/sh", filepath.Join(dir, "prelude.sh"))
	d.cmd.Dir = dir
	d.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "TZ=UTC", "HOME=/root"}
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = procAttr()
	if err := d.cmd.Start(); err != nil {
		d.out.Close()
		return fail(fmt.Errorf("unshare: %w", err))
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	live.Store(d, struct{}{})
	if err := d.waitReady(cfg.StartTimeout); err != nil {
		log := d.Log()
		return nil, errors.Join(err, d.Stop(), fmt.Errorf("its log:\n%s", tail(log, 16<<10)))
	}
	return d, nil
}

// live holds the daemons started and not yet stopped.
var live sync.Map

// Alive describes the daemons started and not stopped yet: a test binary's
// TestMain checks that none is left once every test has cleaned up.
func Alive() []string {
	var out []string
	live.Range(func(k, _ any) bool {
		d := k.(*Daemon)
		out = append(out, fmt.Sprintf("%s on %s (unshare %d)", d.Kind, d.Addr, d.PID()))
		return true
	})
	slices.Sort(out)
	return out
}

// hostPath maps an absolute path of the daemon's file system under /etc,
// /var or /home to its file in the writable layer in Dir.
func (d *Daemon) hostPath(p string) (string, error) {
	clean := filepath.Clean(p)
	if clean != p || !filepath.IsAbs(p) {
		return "", fmt.Errorf("file %q: not a clean absolute path", p)
	}
	parts := strings.SplitN(strings.TrimPrefix(clean, "/"), "/", 2)
	if len(parts) != 2 || (parts[0] != "etc" && parts[0] != "var" && parts[0] != "home") {
		return "", fmt.Errorf("file %q: only files under /etc, /var and /home can be written", p)
	}
	return filepath.Join(d.Dir, "up", parts[0], parts[1]), nil
}

// files returns every file the daemon's file system gets, by path.
func (d *Daemon) files(k Kind, cfg Config) (map[string]string, error) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return nil, err
	}
	group, err := os.ReadFile("/etc/group")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(passwd), "\n") {
		name, _, _ := strings.Cut(line, ":")
		if slices.Contains(cfg.Users, name) {
			return nil, fmt.Errorf("user %s is an account of the machine already (its /etc/passwd): pick another name", name)
		}
	}
	ids := freeIDs(string(passwd), string(group))
	var pw, gr strings.Builder
	pw.Write(passwd)
	gr.Write(group)
	if len(passwd) > 0 && passwd[len(passwd)-1] != '\n' {
		pw.WriteByte('\n')
	}
	if len(group) > 0 && group[len(group)-1] != '\n' {
		gr.WriteByte('\n')
	}
	add := func(name, home, shell string, user bool) {
		id := ids()
		if user {
			fmt.Fprintf(&pw, "%s:x:%d:%d::%s:%s\n", name, id, id, home, shell)
		}
		fmt.Fprintf(&gr, "%s:x:%d:\n", name, id)
	}
	for _, a := range systemAccounts[k] {
		add(a[0], a[1], "/usr/sbin/nologin", true)
	}
	for _, g := range extraGroups[k] {
		add(g, "", "", false)
	}
	for _, u := range cfg.Users {
		add(u, "/home/"+u, "/bin/sh", true)
	}
	files := map[string]string{
		"/etc/passwd":   pw.String(),
		"/etc/group":    gr.String(),
		"/etc/hostname": cfg.Hostname + "\n",
		"/etc/mailname": cfg.Hostname + "\n",
		"/etc/hosts":    "127.0.0.1\tlocalhost\n",
	}
	if cfg.Nameserver.IsValid() {
		files["/etc/resolv.conf"] = "nameserver " + cfg.Nameserver.String() + "\n"
	} else {
		files["/etc/resolv.conf"] = "# no nameserver: postgrey looks nothing up\n"
	}
	ip, port := cfg.Addr.Addr().String(), strconv.Itoa(int(cfg.Addr.Port()))
	switch k {
	case KindPostfix:
		files["/etc/aliases"] = postfixAliases
		files["/etc/postfix/main.cf"] = strings.ReplaceAll(postfixMain, "@HOSTNAME@", cfg.Hostname)
		files["/etc/postfix/master.cf"] = strings.ReplaceAll(postfixMaster, "@ADDR@", ip+":"+port)
	case KindExim:
		files["/etc/aliases"] = debianAliases
		files["/etc/exim4/update-exim4.conf.conf"] = strings.ReplaceAll(eximDebconf, "@IP@", ip)
	case KindOpenSMTPD:
		files["/etc/aliases"] = opensmtpdAliases
		files["/etc/smtpd.conf"] = strings.ReplaceAll(strings.ReplaceAll(opensmtpdConf, "@IP@", ip), "@PORT@", port)
	}
	for p, s := range cfg.Files {
		files[p] = s
	}
	for p, s := range cfg.Append {
		files[p] += s
	}
	return files, nil
}

// freeIDs returns a function handing out numeric ids, from 60100 up, that
// no user or group of the machine has.
func freeIDs(passwd, group string) func() int {
	used := map[int]bool{}
	for _, f := range []string{passwd, group} {
		for _, line := range strings.Split(f, "\n") {
			fields := strings.Split(line, ":")
			for _, i := range []int{2, 3} {
				if i < len(fields) && (i == 2 || f == passwd) {
					if n, err := strconv.Atoi(fields[i]); err == nil {
						used[n] = true
					}
				}
			}
		}
	}
	next := 60100
	return func() int {
		for used[next] {
			next++
		}
		used[next] = true
		return next
	}
}

// prelude is the script run in the daemon's new namespaces.
func (d *Daemon) prelude(root string, k Kind, cfg Config) string {
	pkg := filepath.Join(root, string(k))
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("# mtatest: run %s in private mount, UTS and PID namespaces (see package mtatest).", k)
	line("set -eu")
	line("echo %s >/proc/sys/kernel/hostname", cfg.Hostname)
	lower := func(top string) string {
		l := ""
		if fi, err := os.Stat(filepath.Join(pkg, top)); err == nil && fi.IsDir() {
			l = filepath.Join(pkg, top) + ":"
		}
		return l + "/" + top
	}
	for _, top := range []string{"etc", "var", "home"} {
		line("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s /%s", lower(top),
			filepath.Join(d.Dir, "up", top), filepath.Join(d.Dir, "work", top), top)
	}
	line("mount -t overlay overlay -o ro,lowerdir=%s:/usr /usr", filepath.Join(pkg, "usr"))
	line("mount -t tmpfs -o mode=0755 tmpfs /run")
	for _, u := range cfg.Users {
		line("mkdir -p /home/%s && chown %s:%s /home/%s", u, u, u, u)
	}
	port := strconv.Itoa(int(cfg.Addr.Port()))
	var exe []string
	switch k {
	case KindPostfix:
		// What the postinst and "postfix check" do: the aliases
		// database, the queue directories, data_directory's owner.
		line("postalias /etc/aliases")
		line("postfix check")
		line("chown postfix /var/lib/postfix")
		exe = []string{"/usr/lib/postfix/sbin/master", "-d"}
	case KindExim:
		line("mkdir -p /var/lib/exim4 /var/log/exim4 /var/spool/exim4")
		line("chown Debian-exim:Debian-exim /var/log/exim4 /var/spool/exim4")
		line("chmod 0750 /var/log/exim4 /var/spool/exim4")
	case KindOpenSMTPD:
		exe = []string{"/usr/sbin/smtpd", "-d"}
	case KindPostgrey:
		line("mkdir -p /var/lib/postgrey /etc/postgrey")
		line("chown postgrey:postgrey /var/lib/postgrey")
		line("for f in whitelist_clients whitelist_recipients; do [ -e /etc/postgrey/$f ] || cp /usr/share/postgrey/$f /etc/postgrey/$f; done")
		exe = []string{"/usr/sbin/postgrey", "--inet=" + cfg.Addr.String()}
	}
	for _, s := range cfg.Setup {
		line("%s", s)
	}
	if k == KindExim {
		// Debian's configuration is generated, as the package's
		// scripts do after every change, into
		// /var/lib/exim4/config.autogenerated, which exim4 reads.
		line("update-exim4.conf")
		exe = []string{"/usr/sbin/exim4", "-bdf", "-oX", port}
	}
	exe = append(exe, cfg.Args...)
	quoted := make([]string, len(exe))
	for i, a := range exe {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	// The shell stays: it is the namespace's process 1, which unshare
	// kills (--kill-child) when it dies, and its credentials never change,
	// unlike the daemons' (postgrey's setuid, Postfix's seteuid), which
	// would clear that parent-death signal.
	line("%s &", strings.Join(quoted, " "))
	line("wait $!")
	return b.String()
}

// waitReady waits until the daemon listens on its address (an MTA: until
// it greets), the daemon exits, or timeout passes.
func (d *Daemon) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		select {
		case <-d.done:
			return fmt.Errorf("exited before it listened (%v)", d.cmd.ProcessState)
		default:
		}
		if last = d.probe(); last == nil {
			d.findInit()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %v", timeout, last)
		}
		select {
		case <-d.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probe connects once; for an MTA it reads the greeting and says QUIT.
func (d *Daemon) probe() error {
	c, err := net.DialTimeout("tcp", d.Addr.String(), 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if d.Kind == KindPostgrey {
		return nil
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("greeting: %w", err)
		}
		if len(l) < 4 || !strings.HasPrefix(l, "220") {
			return fmt.Errorf("greeting %q", strings.TrimSpace(l))
		}
		if l[3] == ' ' {
			break
		}
	}
	if _, err := c.Write([]byte("QUIT\r\n")); err != nil {
		return err
	}
	_, _ = r.ReadString('\n')
	return nil
}

// findInit records the host PID of the daemon's process 1 (unshare's
// child) and its PID namespace.
func (d *Daemon) findInit() {
	pid := d.cmd.Process.Pid
	for _, c := range children(pid) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", c))
		if err != nil {
			continue
		}
		d.mu.Lock()
		d.initID, d.pidNS = c, ns
		d.mu.Unlock()
		return
	}
}

// children returns the PIDs whose parent is pid (a child belongs to the
// thread that forked it: every thread's list is read).
func children(pid int) []int {
	var out []int
	if lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid)); len(lists) > 0 {
		for _, l := range lists {
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					out = append(out, n)
				}
			}
		}
		return out
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// PID is the host PID of the unshare process Start started; the daemon
// is its child.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Processes returns the host PIDs of every process in the daemon's PID
// namespace: the daemon and its children (none once it is stopped).
func (d *Daemon) Processes() []int {
	d.mu.Lock()
	ns := d.pidNS
	d.mu.Unlock()
	if ns == "" {
		return nil
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", n)); err == nil && l == ns {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Running reports whether the daemon is still running.
func (d *Daemon) Running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// Log returns what the daemon wrote so far: its standard output and error
// (Postfix's log, OpenSMTPD's, postgrey's) and the files under its
// /var/log (Exim's mainlog and rejectlog).
func (d *Daemon) Log() string {
	var b strings.Builder
	if out, err := os.ReadFile(filepath.Join(d.Dir, "output.log")); err == nil {
		b.Write(out)
	}
	logs := filepath.Join(d.Dir, "up", "var", "log")
	_ = filepath.WalkDir(logs, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if body, err := os.ReadFile(p); err == nil && len(body) > 0 {
			rel, _ := filepath.Rel(logs, p)
			fmt.Fprintf(&b, "==> /var/log/%s <==\n%s", rel, body)
		}
		return nil
	})
	return b.String()
}

// Stop kills the daemon and every process of its PID namespace, waits
// for them, and removes Dir.
func (d *Daemon) Stop() error {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return nil
	}
	d.stopped = true
	init := d.initID
	d.mu.Unlock()
	var err error
	select {
	case <-d.done:
	default:
		// SIGKILL to the namespace's process 1 is delivered from the
		// parent namespace; its death kills the rest, and unshare,
		// having reaped it, exits. Without it known, unshare's own
		// death does the same (--kill-child).
		if init > 0 && slices.Contains(children(d.cmd.Process.Pid), init) {
			_ = syscall.Kill(init, syscall.SIGKILL)
		} else {
			_ = d.cmd.Process.Kill()
		}
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
			err = fmt.Errorf("%s on %s did not stop within 30 s; killed unshare", d.Kind, d.Addr)
		}
	}
	// The namespace's processes are reaped before its process 1 is; wait
	// for any still exiting all the same.
	for deadline := time.Now().Add(10 * time.Second); len(d.Processes()) > 0; {
		if time.Now().After(deadline) {
			err = errors.Join(err, fmt.Errorf("%s on %s: processes %v left", d.Kind, d.Addr, d.Processes()))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.out.Close()
	live.Delete(d)
	return errors.Join(err, os.RemoveAll(d.Dir))
}

// dirPrefix names the daemons' directories in the system's temporary
// directory.
const dirPrefix = "verifyd-mta-"

var sweepOnce sync.Once

// sweepStale removes the directories of daemons whose test process died
// without its cleanup (a SIGKILL, a timeout's panic): their namespaces died
// with it, their files stay. A directory's "owner" file names the process
// that made it (selfID); one whose process is gone is removed.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		owner, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(owner))
		if len(f) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		if pid > 0 && startTime(pid) != f[1] {
			os.RemoveAll(dir)
		}
	}
}

// selfID is "pid start-time" of this process: the start time tells a
// process from a later one that got its PID.
func selfID() string { return strconv.Itoa(os.Getpid()) + " " + startTime(os.Getpid()) }

// startTime is field 22 of /proc/<pid>/stat, the process's start time in
// clock ticks since boot; empty when there is no such process.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	// After "pid (comm)": state is field 3, start time field 22.
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
