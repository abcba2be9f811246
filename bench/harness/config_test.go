package harness

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
)

// TestVerifydConfigParses checks the file the harness writes with verifyd's
// own parser: no unknown key, every value valid, and the values arrive.
func TestVerifydConfigParses(t *testing.T) {
	c := DefaultVerifydConfig()
	c.DataDir = "/tmp/some dir/data"
	c.AdminSocket = "/tmp/some dir/admin.sock"
	c.DNS = "127.0.53.7:40943"
	c.SMTPPort = 43241
	c.Egress = EgressRange(netip.MustParseAddr("127.0.0.18"), 8)
	text := c.TOML()
	got, err := config.Parse(text)
	if err != nil {
		t.Fatalf("verifyd refuses the harness's config: %v\n%s", err, text)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"data_dir", got.DataDir, c.DataDir},
		{"admin.socket", got.Admin.Socket, c.AdminSocket},
		{"http.listen", got.HTTP.Listen, "127.0.0.1:0"},
		{"metrics.listen", got.Metrics.Listen, ""},
		{"resolver.upstreams", strings.Join(got.Resolver.Upstreams, ","), "127.0.53.7:40943"},
		{"smtp.port", got.SMTP.Port, 43241},
		{"smtp.command_timeout", got.SMTP.CommandTimeout, 5 * time.Second},
		{"egress.addresses", strings.Join(got.Egress.Addresses, ","), "127.0.0.18,127.0.0.19,127.0.0.20,127.0.0.21,127.0.0.22,127.0.0.23,127.0.0.24,127.0.0.25"},
		{"egress.max_rate_per_host", got.Egress.MaxRatePerHost, 10000.0},
		{"egress.greylist_cooldown", got.Egress.GreylistCooldown, 3 * time.Second},
		{"egress.max_cooldown", got.Egress.MaxCooldown, 12 * time.Second},
		{"probe.realtime_workers", got.Probe.RealtimeWorkers, 4096},
		{"rate_limits.disabled", got.RateLimits.Disabled, true},
		{"log_level", got.LogLevel, "warn"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestEgressRange(t *testing.T) {
	got := EgressRange(netip.MustParseAddr("127.0.0.254"), 3)
	if len(got) != 3 || got[0].String() != "127.0.0.254" || got[2].String() != "127.0.1.0" {
		t.Errorf("%v", got)
	}
}

func TestWorldArgs(t *testing.T) {
	o := ShortOptions().World
	o.Extra = []string{"-refuse", "0.02"}
	a := strings.Join(o.args("/w/e.jsonl", "/w/w.json"), " ")
	for _, want := range []string{"-gen", "-domains 2000", "-latency 20ms", "-starttls 0.3", "-write-expected /w/e.jsonl",
		"-write-world /w/w.json", "-smtp-port -1", "-dns 127.0.53.7:0", "-disposable mailinator.com,guerrillamail.com", "-refuse 0.02"} {
		if !strings.Contains(a, want) {
			t.Errorf("mailworld args lack %q: %s", want, a)
		}
	}
}
