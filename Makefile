# verifyd — build, test and run targets. Every tool a target needs is
# installed here, into ./bin, at a pinned version from the Go module proxy.

GO          ?= go
BIN         := $(CURDIR)/bin
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)
export CGO_ENABLED ?= 1

.PHONY: all build run test lint vet demo bench lists clean browser screenshots postgres mta

all: build

# build puts verifyd, verifyctl and mailworld into ./bin.
build:
	mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/... ./bench/cmd/...

# run starts verifyd in the foreground on the embedded defaults (data in
# ./data, API on 127.0.0.1:8080), or on ./verifyd.toml when it exists.
run: build
	@if [ -f verifyd.toml ]; then exec $(BIN)/verifyd -config verifyd.toml; \
	else exec $(BIN)/verifyd; fi

# demo starts the simulated mail world and a verifyd configured for it.
demo: build
	./bench/demo.sh

# bench runs verifybench's short run (about 6 minutes): a generated world,
# a real verifyd, nine scenarios; writes bench/RESULTS.md, the plot and a
# JSON result in bench/results/. BENCHFLAGS passes flags (e.g. -full,
# -compare OTHER_VERIFYD); see bench/README.md.
bench:
	$(GO) run ./bench/cmd/verifybench $(BENCHFLAGS)

# bench-check runs the short scenarios (fresh, cache, batch, mixed) of this
# tree's verifyd (A) against BASE, another verifyd binary (B), and exits
# non-zero (3) when a figure of A is worse than B's by more than its noise
# band (bench/results/noise.json, which bench-noise learns on this
# machine); the table of such figures is the last thing it prints. Not
# part of make test: a benchmark is not a timed test.
# bench-noise runs one build against itself ROUNDS times (default 5) on
# the same scenarios and writes the bands.
BENCH_CHECK_SCENARIOS = fresh,cache,batch,mixed
.PHONY: bench-check bench-noise
bench-check:
	@test -n "$(BASE)" || { echo 'usage: make bench-check BASE=/path/to/other/verifyd [BENCHFLAGS=...]'; exit 2; }
	$(GO) run ./bench/cmd/verifybench -scenarios $(BENCH_CHECK_SCENARIOS) -no-report -compare $(BASE) -fail-on-regression $(BENCHFLAGS)
bench-noise:
	$(GO) run ./bench/cmd/verifybench -scenarios $(BENCH_CHECK_SCENARIOS) -noise $(or $(ROUNDS),5) $(BENCHFLAGS)

# microbench runs the Go benchmarks of every package, a few rounds each.
.PHONY: microbench
microbench:
	$(GO) test -run '^$$' -bench . -benchmem -count 3 -benchtime 1s ./...

# lists refreshes the engine's list data from the npm registry.
lists:
	./probe/lists/update.sh

$(STATICCHECK):
	mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/staticcheck $(STATICCHECK)

vet:
	$(GO) vet ./...

lint: vet $(STATICCHECK)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null; git ls-files -o --exclude-standard '*.go' 2>/dev/null)); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(STATICCHECK) ./...

# test runs every test with -race. The dashboard's browser tests need
# Chromium: "make browser" installs Debian's when missing, and
# VERIFYD_BROWSER_TESTS=require makes them fail, not skip, without it.
# The PostgreSQL tests start their own server from Debian's binaries:
# "make postgres" installs them when missing, VERIFYD_PG_TESTS=require
# likewise. Then it runs the allocation tests (Test...DoNotAllocate) once
# more without -race, whose instrumentation allocates (they skip under
# it): ALLOC_PKGS are the packages that have one. The real-MTA tests
# (internal/mtatest, probe/realmta) run Postfix, Exim and OpenSMTPD from
# Debian's packages: "make mta" unpacks them, VERIFYD_MTA_TESTS=require.
ALLOC_PKGS = $(sort $(dir $(shell grep -rl --include='*_test.go' --exclude-dir=.git \
	'func Test[A-Za-z0-9_]*DoNotAllocate' .)))
test: lint systemd-verify browser postgres mta package-test monitoring-check
	VERIFYD_BROWSER_TESTS=require VERIFYD_PG_TESTS=require VERIFYD_MTA_TESTS=require $(GO) test -race -shuffle=on -count=1 ./...
	$(GO) test -count=1 -run 'DoNotAllocate' $(ALLOC_PKGS)

# browser installs Debian's chromium with apt-get when no chromium is on
# PATH (root on Debian/Ubuntu only; elsewhere install it yourself, or
# point CHROMIUM at a Chrome or Chromium binary).
browser:
	@./server/web/browser.sh

# postgres installs Debian's postgresql with apt-get when no PostgreSQL
# server binaries are found (root on Debian/Ubuntu only; elsewhere install
# them yourself, or point VERIFYD_PG_BIN at their directory). The tests
# never use the package's cluster: each starts its own (internal/pgtest).
postgres:
	@./internal/pgtest/install.sh

# mta unpacks Debian's postfix, exim4 and opensmtpd, and postgrey, into
# ~/.cache/verifyd/mta (apt-get download, dpkg -x: they conflict with one
# another, so none is installed; root on Debian only). The tests run each
# in namespaces of its own (internal/mtatest).
mta:
	@./internal/mtatest/install.sh

# screenshots runs the dashboard's browser test and keeps a screenshot of
# every page in docs/dashboard/ (docs/dashboard.md shows them).
screenshots: browser
	mkdir -p docs/dashboard
	VERIFYD_BROWSER_TESTS=require VERIFYD_SCREENSHOTS=$(CURDIR)/docs/dashboard \
		$(GO) test -count=1 -run TestDashboardEndToEnd ./cmd/verifyd/

clean:
	rm -rf $(BIN)

# ---- installation (systemd/README.md, docs/operations.md) -----------------
# make install [DESTDIR=/tmp/pkg] [PREFIX=/usr] puts verifyd where a Debian
# admin expects it. Files under /etc are installed only when absent, so a
# reinstall or upgrade never overwrites the operator's configuration. With
# DESTDIR empty it also creates the verifyd user and directories and
# reloads systemd, if systemd runs.
PREFIX      ?= /usr
SBINDIR     ?= $(PREFIX)/sbin
BINDIR      ?= $(PREFIX)/bin
LIBEXECDIR  ?= $(PREFIX)/libexec
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
DOCDIR      ?= $(PREFIX)/share/doc/verifyd
SHAREDIR    ?= $(PREFIX)/share/verifyd
INSTALL     ?= install
# The unit files name /usr/sbin, /usr/libexec and /usr/share/doc; another
# PREFIX is substituted in.
UNIT_SED     = -e 's|/usr/sbin/|$(SBINDIR)/|g' -e 's|/usr/libexec/|$(LIBEXECDIR)/|g' \
               -e 's|/usr/share/doc/verifyd|$(DOCDIR)|g'

.PHONY: install uninstall systemd-verify
install: build
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)/verifyd \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
		$(DESTDIR)$(DOCDIR) $(DESTDIR)$(SHAREDIR)/lists/LICENSES
	$(INSTALL) -m 0755 $(BIN)/verifyd $(DESTDIR)$(SBINDIR)/verifyd
	$(INSTALL) -m 0755 $(BIN)/verifyctl $(DESTDIR)$(BINDIR)/verifyctl
	sed $(UNIT_SED) systemd/verifyd-egress.sh >$(DESTDIR)$(LIBEXECDIR)/verifyd/verifyd-egress
	chmod 0755 $(DESTDIR)$(LIBEXECDIR)/verifyd/verifyd-egress
	for u in verifyd.service verifyd-egress@.service; do \
		sed $(UNIT_SED) systemd/$$u >$(DESTDIR)$(UNITDIR)/$$u && chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	$(INSTALL) -m 0644 systemd/verifyd.sysusers $(DESTDIR)$(SYSUSERSDIR)/verifyd.conf
	$(INSTALL) -m 0644 systemd/verifyd.tmpfiles $(DESTDIR)$(TMPFILESDIR)/verifyd.conf
	$(INSTALL) -m 0644 docs/operations.md systemd/verifyd.toml.example $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 0644 systemd/README.md $(DESTDIR)$(DOCDIR)/systemd.md
	$(INSTALL) -m 0644 probe/lists/data/*.txt $(DESTDIR)$(SHAREDIR)/lists/
	$(INSTALL) -m 0644 probe/lists/data/LICENSES/*.txt $(DESTDIR)$(SHAREDIR)/lists/LICENSES/
	$(INSTALL) -d -m 0755 $(DESTDIR)/etc/verifyd $(DESTDIR)/etc/verifyd/lists
	@for f in verifyd.toml:systemd/verifyd.toml.example lists/README:systemd/lists.README; do \
		dst=$(DESTDIR)/etc/verifyd/$${f%%:*}; \
		if [ -e "$$dst" ]; then echo "kept $$dst"; \
		else echo "$(INSTALL) -m 0644 $${f#*:} $$dst"; $(INSTALL) -m 0644 $${f#*:} "$$dst" || exit 1; fi; \
	done
	@if [ -z "$(DESTDIR)" ]; then \
		if command -v systemd-sysusers >/dev/null; then systemd-sysusers $(SYSUSERSDIR)/verifyd.conf; fi; \
		if command -v systemd-tmpfiles >/dev/null; then systemd-tmpfiles --create $(TMPFILESDIR)/verifyd.conf; fi; \
		if [ -d /run/systemd/system ]; then systemctl daemon-reload; \
			echo "next: systemctl enable --now verifyd (see $(DOCDIR)/operations.md)"; fi; \
	fi

# uninstall removes what install put outside /etc; the configuration in
# /etc/verifyd, the data in /var/lib/verifyd and the backups stay.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/verifyd $(DESTDIR)$(BINDIR)/verifyctl \
		$(DESTDIR)$(LIBEXECDIR)/verifyd/verifyd-egress \
		$(DESTDIR)$(UNITDIR)/verifyd.service $(DESTDIR)$(UNITDIR)/verifyd-egress@.service \
		$(DESTDIR)$(SYSUSERSDIR)/verifyd.conf $(DESTDIR)$(TMPFILESDIR)/verifyd.conf
	rm -rf $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SHAREDIR)
	-rmdir $(DESTDIR)$(LIBEXECDIR)/verifyd
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

# deb builds the Debian packages of this tree into dist/, for amd64 and
# arm64 (packaging/deb/build.sh; DEB_ARCHES picks others), and checks
# them with lintian, which it installs with apt-get when missing (every
# override is explained in packaging/deb/lintian-overrides).
DEB_ARCHES ?= amd64 arm64
DIST       ?= $(CURDIR)/dist
.PHONY: deb lintian
deb:
	for a in $(DEB_ARCHES); do ./packaging/deb/build.sh $$a $(DIST) || exit 1; done
	./packaging/deb/lintian.sh $(DIST)/verifyd_*.deb

# monitoring-check checks monitoring/ with promtool (Debian's prometheus,
# installed with apt-get when missing): the alert rules and their unit
# tests, the Grafana dashboard's queries, the metric names.
.PHONY: monitoring-check
monitoring-check:
	./monitoring/check.sh

# package-test installs the package of this tree and of the commit before
# it into a throwaway Debian root (mmdebstrap, cached in ~/.cache/verifyd)
# and checks install, -check-config, systemd-analyze verify, an upgrade
# that keeps accounts, keys, history and signing keys, remove and purge
# (packaging/deb/test.sh). Root only; make test runs it.
.PHONY: package-test
package-test:
	./packaging/deb/test.sh

# systemd-verify installs into a scratch root and runs "systemd-analyze
# verify" and the offline "systemd-analyze security" on the units (no
# running systemd needed); it installs systemd-analyze with apt-get when
# missing. The exposure limits are the scores recorded in systemd/README.md
# (x10): a change that weakens the sandbox fails it.
VERIFYD_EXPOSURE_MAX ?= 11
EGRESS_EXPOSURE_MAX  ?= 5
systemd-verify: build
	MAKE="$(MAKE)" VERIFYD_EXPOSURE_MAX=$(VERIFYD_EXPOSURE_MAX) EGRESS_EXPOSURE_MAX=$(EGRESS_EXPOSURE_MAX) \
		./systemd/verify.sh
