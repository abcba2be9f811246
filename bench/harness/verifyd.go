package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/verifyd/verifyd/storage/pebble"
)

// Verifyd is one running verifyd the harness started.
type Verifyd struct {
	// Label names the binary in the report: "A" (the one under test) or
	// "B" (-compare).
	Label   string
	Bin     string
	Dir     string
	Config  VerifydConfig
	CfgPath string
	Proc    *Proc
	// Base is the API's base URL, http://127.0.0.1:port; Addr its host:port.
	Base, Addr string
	// Key is the demo account's API key, Account its id, both printed by
	// verifyd on its first start.
	Key, Account string
	// CreditsVia says how the account's balance was raised.
	CreditsVia string

	procs *Procs
	// reputationLogs counts the egress pool's reputation warnings in
	// verifyd's log (ReputationLogs).
	reputationLogs atomic.Int64
}

// ReputationLogs returns how many reputation warnings verifyd has logged
// since the harness started it: its egress pool logs each as a line whose
// msg is "egress reputation". Binaries without the counter
// verifyd_egress_reputation_warnings_total are measured by it.
func (v *Verifyd) ReputationLogs() int64 { return v.reputationLogs.Load() }

// isReputationLog reports whether a line of verifyd's log is a reputation
// warning of the egress pool, in the JSON or the text format.
func isReputationLog(line string) bool {
	return strings.Contains(line, `"msg":"egress reputation"`) || strings.Contains(line, `msg="egress reputation"`)
}

var (
	apiRE     = regexp.MustCompile(`API on (http://[0-9.:]+)`)
	keyRE     = regexp.MustCompile(`(svc_live_\S+)`)
	accountRE = regexp.MustCompile(`created demo account (\S+) with`)
)

// StartVerifyd writes cfg (with DataDir and AdminSocket set inside dir)
// and starts bin on it, waiting until the API answers.
func StartVerifyd(ctx context.Context, procs *Procs, label, bin, dir string, cfg VerifydConfig) (*Verifyd, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg.DataDir = filepath.Join(dir, "data")
	if cfg.GreetingTimeout == 0 && knowsKey(ctx, bin, "greeting_timeout") {
		// A tarpit costs command_timeout, as it did before verifyd
		// waited longer for greetings than for replies: the figures of
		// binaries with and without smtp.greeting_timeout compare.
		cfg.GreetingTimeout = cfg.CommandTimeout
	}
	if cfg.AdminSocket == "" {
		cfg.AdminSocket = filepath.Join(dir, "admin.sock")
	}
	v := &Verifyd{Label: label, Bin: bin, Dir: dir, Config: cfg, CfgPath: filepath.Join(dir, "verifyd.toml"), procs: procs}
	if err := os.WriteFile(v.CfgPath, []byte(cfg.TOML()), 0o600); err != nil {
		return nil, err
	}
	if err := v.start(ctx); err != nil {
		return nil, err
	}
	if v.Key == "" && !cfg.Follower {
		return nil, fmt.Errorf("verifyd %s printed no API key on its first start (stdout in %s)", label, v.Proc.StdoutLog)
	}
	return v, nil
}

// start runs the process and waits for "API on".
func (v *Verifyd) start(ctx context.Context) error {
	api := make(chan string, 1)
	key := make(chan [2]string, 1)
	var acct string
	p, err := StartProc("verifyd-"+v.Label, v.Bin, []string{"-config", v.CfgPath}, v.Dir,
		func(line string) {
			if m := accountRE.FindStringSubmatch(line); m != nil {
				acct = strings.TrimSuffix(m[1], ".")
			}
			if m := keyRE.FindStringSubmatch(line); m != nil {
				select {
				case key <- [2]string{m[1], acct}:
				default:
				}
			}
		},
		func(line string) {
			if isReputationLog(line) {
				v.reputationLogs.Add(1)
			}
			if m := apiRE.FindStringSubmatch(line); m != nil {
				select {
				case api <- m[1]:
				default:
				}
			}
		})
	if err != nil {
		return err
	}
	v.procs.Add(p)
	v.Proc = p
	base, err := waitLine(ctx, p, api, time.Minute, "its API address")
	if err != nil {
		return err
	}
	v.Base = base
	v.Addr = strings.TrimPrefix(base, "http://")
	// stdout and stderr are read apart: the key line may come a moment
	// after the API line. A restart prints none.
	select {
	case k := <-key:
		v.Key, v.Account = k[0], k[1]
	case <-time.After(2 * time.Second):
	}
	return v.waitHealthy(ctx)
}

func (v *Verifyd) waitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(v.Base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("verifyd %s: /healthz did not answer 200 in 30 s: %v", v.Label, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the process.
func (v *Verifyd) Stop() error { return v.Proc.Stop(15 * time.Second) }

// SetCredits sets the demo account's balance to n. verifyd gives the demo
// account 1,000 credits; the benchmark needs far more. It uses the admin
// API on the unix socket (POST /v1/accounts/{id}/credits {"set": n}, the
// route verifyctl's "credits set" uses) when this verifyd serves it. A
// verifyd without the admin socket is stopped, its balance is set offline
// through the storage package on its data directory, and it is started
// again (same data, same key).
func (v *Verifyd) SetCredits(ctx context.Context, n int64) error {
	if v.waitSocket(3 * time.Second) {
		err := v.adminSetCredits(ctx, n)
		if err == nil {
			v.CreditsVia = "admin API on the unix socket (POST /v1/accounts/{id}/credits)"
			return nil
		}
		return fmt.Errorf("verifyd %s: admin socket: %w", v.Label, err)
	}
	if v.Account == "" {
		return fmt.Errorf("verifyd %s: no admin socket and no account id printed: cannot raise the balance", v.Label)
	}
	if err := v.Stop(); err != nil {
		return err
	}
	if err := offlineSetCredits(filepath.Join(v.Config.DataDir, "db"), v.Account, n); err != nil {
		return fmt.Errorf("verifyd %s: offline credit change: %w", v.Label, err)
	}
	if err := v.start(ctx); err != nil {
		return fmt.Errorf("verifyd %s: restart after the credit change: %w", v.Label, err)
	}
	v.CreditsVia = "offline, through the storage package while verifyd was stopped (this verifyd serves no admin socket)"
	return nil
}

// waitSocket reports whether the admin socket appears within d.
func (v *Verifyd) waitSocket(d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if fi, err := os.Stat(v.Config.AdminSocket); err == nil && fi.Mode()&fs.ModeSocket != 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// adminClient is an HTTP client that dials only the admin socket.
func (v *Verifyd) adminClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", v.Config.AdminSocket)
		},
	}}
}

func (v *Verifyd) adminSetCredits(ctx context.Context, n int64) error {
	hc := v.adminClient()
	defer hc.CloseIdleConnections()
	if v.Account == "" {
		var list struct {
			Accounts []struct {
				ID string `json:"id"`
			} `json:"accounts"`
		}
		if err := adminDo(ctx, hc, "GET", "/v1/accounts", nil, &list); err != nil {
			return err
		}
		if len(list.Accounts) == 0 {
			return errors.New("no account")
		}
		v.Account = list.Accounts[0].ID
	}
	body := map[string]any{"set": n, "note": "verifybench"}
	return adminDo(ctx, hc, "POST", "/v1/accounts/"+v.Account+"/credits", body, nil)
}

func adminDo(ctx context.Context, hc *http.Client, method, path string, in, out any) error {
	var rd io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://verifyd"+path, rd)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// offlineSetCredits opens verifyd's database (verifyd must be stopped) and
// sets the account's balance.
func offlineSetCredits(dir, account string, n int64) error {
	db, err := pebble.Open(dir, pebble.Options{
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		PurgeInterval: -1,
	})
	if err != nil {
		return err
	}
	if _, err := db.SetCredits(context.Background(), account, n, "verifybench"); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}

// knowsKey reports whether bin's configuration has key: its -print-config
// (the embedded defaults as TOML) names it. Older binaries refuse keys they
// do not know.
func knowsKey(ctx context.Context, bin, key string) bool {
	out, err := exec.CommandContext(ctx, bin, "-print-config").Output()
	if err != nil {
		return false
	}
	return regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(key) + `\s*=`).Match(out)
}

// NewAccount creates an account with credits on the enterprise plan (the
// demo account's) through the admin socket and mints it a key with both
// scopes; it returns the key.
func (v *Verifyd) NewAccount(ctx context.Context, name string, credits int64) (string, error) {
	if !v.waitSocket(time.Second) {
		return "", errors.New("this verifyd serves no admin socket")
	}
	hc := v.adminClient()
	defer hc.CloseIdleConnections()
	var acct struct {
		ID string `json:"id"`
	}
	body := map[string]any{"name": name, "plan": "enterprise", "credits": credits}
	if err := adminDo(ctx, hc, "POST", "/v1/accounts", body, &acct); err != nil {
		return "", err
	}
	var key struct {
		Key string `json:"key"`
	}
	body = map[string]any{"scopes": []string{"validate:read", "validate:write"}, "label": "verifybench"}
	if err := adminDo(ctx, hc, "POST", "/v1/accounts/"+acct.ID+"/keys", body, &key); err != nil {
		return "", err
	}
	if key.Key == "" {
		return "", errors.New("POST /v1/accounts/{id}/keys answered no key")
	}
	return key.Key, nil
}
