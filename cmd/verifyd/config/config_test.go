package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultsValidate(t *testing.T) {
	c := Defaults()
	c.Derive()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.SMTP.Port != 25 || c.Limits.BatchMaxEmails != 100000 || c.RateLimits.Validate != 500 {
		t.Fatalf("unexpected defaults: %+v", c)
	}
	// Each address says its own PTR name, and MAIL FROM follows it.
	if c.SMTP.HeloName != "" || c.SMTP.MailFrom != "" {
		t.Fatalf("helo_name %q, mail_from %q: want both per session by default", c.SMTP.HeloName, c.SMTP.MailFrom)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	c, err := Parse("")
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	d.Derive()
	if c.HTTP.Listen != d.HTTP.Listen || c.Admin.Socket != d.Admin.Socket {
		t.Fatalf("empty file differs from defaults: %+v", c)
	}
}

func TestParseOverrides(t *testing.T) {
	c, err := Parse(`
data_dir = "/srv/verifyd"
[http]
listen = "0.0.0.0:9000"
trusted_proxies = ["10.0.0.0/8", "192.0.2.1"]
[smtp]
port = 2525
command_timeout = "1m30s"
[egress]
addresses = ["127.0.1.1", "::1"]
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/srv/verifyd" || c.HTTP.Listen != "0.0.0.0:9000" || c.SMTP.Port != 2525 {
		t.Fatalf("overrides not applied: %+v", c)
	}
	if c.SMTP.CommandTimeout != 90*time.Second {
		t.Fatalf("command_timeout = %s", c.SMTP.CommandTimeout)
	}
	if c.Admin.Socket != "/srv/verifyd/admin.sock" {
		t.Fatalf("admin socket not derived from data_dir: %q", c.Admin.Socket)
	}
	if len(c.Egress.Addresses) != 2 {
		t.Fatalf("egress addresses: %v", c.Egress.Addresses)
	}
}

// TestParseReportsEveryProblem shows that one bad file gets one error naming
// every problem: the unknown key and both bad values.
func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse(`
[http]
listen = "nonsense"
lisen = "127.0.0.1:1"
[smtp]
port = 70000
`)
	if err == nil {
		t.Fatal("bad file accepted")
	}
	for _, want := range []string{"http.lisen: unknown key", "http.listen:", "smtp.port:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

func TestValidateTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		key  string
	}{
		{"log level", func(c *Config) { c.LogLevel = "loud" }, "log_level"},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, "log_format"},
		{"proxy", func(c *Config) { c.HTTP.TrustedProxies = []string{"x"} }, "http.trusted_proxies[0]"},
		{"upstream", func(c *Config) { c.Resolver.Upstreams = []string{"1.2.3.4"} }, "resolver.upstreams[0]"},
		{"ttl order", func(c *Config) { c.Resolver.MaxTTL = time.Second }, "resolver.max_ttl"},
		{"egress dup", func(c *Config) { c.Egress.Addresses = []string{"127.0.1.1", "127.0.1.1"} }, "egress.addresses[1]"},
		{"egress bad", func(c *Config) { c.Egress.Addresses = []string{"host"} }, "egress.addresses[0]"},
		{"egress dir", func(c *Config) { c.Egress.AddressesDir = "egress.d" }, "egress.addresses_dir"},
		{"mail from", func(c *Config) { c.SMTP.MailFrom = "nobody" }, "smtp.mail_from"},
		{"helo", func(c *Config) { c.SMTP.HeloName = "a b" }, "smtp.helo_name"},
		{"workers", func(c *Config) { c.Probe.RealtimeWorkers = 0 }, "probe.realtime_workers"},
		{"sched target", func(c *Config) { c.Probe.BatchSchedTarget = 0 }, "probe.batch_sched_target"},
		{"queue target", func(c *Config) { c.Probe.BatchQueueTarget = -5 * time.Millisecond }, "probe.batch_queue_target"},
		{"timeout", func(c *Config) { c.SMTP.ConnectTimeout = 0 }, "smtp.connect_timeout"},
		{"window", func(c *Config) { c.RateLimits.Window = -time.Second }, "rate_limits.window"},
		{"metrics", func(c *Config) { c.Metrics.Listen = "9464" }, "metrics.listen"},
		{"tls half", func(c *Config) { c.HTTP.TLSCert = "/x/cert.pem" }, "http.tls_cert"},
		{"tls twice", func(c *Config) {
			c.HTTP.TLSCert, c.HTTP.TLSKey, c.HTTP.ACMEHosts = "/x/c.pem", "/x/k.pem", []string{"box.example.com"}
		}, "http.acme_hosts"},
		{"acme ip", func(c *Config) { c.HTTP.ACMEHosts = []string{"192.0.2.1"} }, "http.acme_hosts[0]"},
		{"acme bare", func(c *Config) { c.HTTP.ACMEHosts = []string{"localhost"} }, "http.acme_hosts[0]"},
		{"acme http", func(c *Config) {
			c.HTTP.ACMEHosts, c.HTTP.ACMEDirectory = []string{"box.example.com"}, "http://ca.example/dir"
		}, "http.acme_directory"},
		{"acme email alone", func(c *Config) { c.HTTP.ACMEEmail = "ops@example.com" }, "http.acme_hosts"},
		{"redirect without tls", func(c *Config) { c.HTTP.RedirectListen = "0.0.0.0:80" }, "http.redirect_listen"},
		{"hsts", func(c *Config) { c.HTTP.HSTSMaxAge = -time.Second }, "http.hsts_max_age"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.Derive()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.key+":") {
				t.Fatalf("want an error naming %s, got %v", tc.key, err)
			}
		})
	}
}

func TestTOMLRoundTrip(t *testing.T) {
	c := Defaults()
	c.Derive()
	text, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(text)
	if err != nil {
		t.Fatalf("printed config does not parse back: %v\n%s", err, text)
	}
	if back.HTTP.ReadTimeout != c.HTTP.ReadTimeout || back.SMTP.HeloName != c.SMTP.HeloName {
		t.Fatalf("round trip changed values")
	}
}

func TestStateDirectory(t *testing.T) {
	t.Setenv("STATE_DIRECTORY", "/var/lib/verifyd")
	t.Setenv("RUNTIME_DIRECTORY", "/run/verifyd")
	c := Defaults()
	c.Derive()
	if c.DataDir != "/var/lib/verifyd" || c.Admin.Socket != "/run/verifyd/admin.sock" {
		t.Fatalf("systemd directories ignored: %q %q", c.DataDir, c.Admin.Socket)
	}
}

// TestPprofNeedsMetricsListener: metrics.pprof serves on metrics.listen,
// so turning it on without the listener is a mistake worth reporting.
func TestPprofNeedsMetricsListener(t *testing.T) {
	if _, err := Parse("[metrics]\nlisten = \"\"\npprof = true\n"); err == nil || !strings.Contains(err.Error(), "metrics.pprof") {
		t.Fatalf("pprof without a metrics listener: %v, want an error naming metrics.pprof", err)
	}
	c, err := Parse("[metrics]\npprof = true\n")
	if err != nil || !c.Metrics.Pprof {
		t.Fatalf("pprof on the default listener: %+v, %v", c.Metrics, err)
	}
}

// TestRedactDSN: -print-config (Config.TOML) never shows the database's
// password, in either DSN form; a DSN without one is shown as it is.
func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"":                                       "",
		"postgres://verifyd@db1:5432/verifyd":    "postgres://verifyd@db1:5432/verifyd",
		"postgres://verifyd:s3cr%2Ft@db1/v":      "postgres://verifyd:xxxxx@db1/v",
		"postgres://u@db1/v?password=s3cret&x=1": "postgres://u@db1/v?password=xxxxx&x=1",
		"host=db1 user=verifyd password=s3cret dbname=v": "host=db1 user=verifyd password=xxxxx dbname=v",
	} {
		if got := RedactDSN(in); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
	c := Defaults()
	c.Storage.DSN = "postgres://verifyd:s3cret@db1/verifyd"
	text, err := c.TOML()
	if err != nil || strings.Contains(text, "s3cret") || !strings.Contains(text, "xxxxx") {
		t.Fatalf("TOML shows %q (%v)", text, err)
	}
	if c.Storage.DSN != "postgres://verifyd:s3cret@db1/verifyd" {
		t.Fatal("TOML changed the configuration")
	}
}
