package harness

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage/postgres"
)

// Scenario 8, fleet: FleetBoxes verifyds of binary A on one PostgreSQL
// (started by the harness from the Debian packages, on loopback, in the
// work directory) against the single Pebble verifyd A of the run, in the
// same run and world: cache:true hits per second, fresh probes per
// second, and a batch's completion. The load is split evenly over the
// boxes, as a balancer would; every process shares this machine's cores,
// so the figures are the cost of the shared database, not the gain of more
// machines (the report's arithmetic is about that).

// FleetBoxes is how many boxes the fleet scenario runs.
const FleetBoxes = 2

// FleetResult is scenario 8.
type FleetResult struct {
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	Boxes   int    `json:"boxes"`
	// Cache and Fresh compare the loads on the single box and on the
	// fleet; Batch the batch's completion.
	Cache *FleetPair  `json:"cache,omitempty"`
	Fresh *FleetPair  `json:"fresh,omitempty"`
	Batch *FleetBatch `json:"batch,omitempty"`
}

// FleetPair is one load on the single box and on the fleet.
type FleetPair struct {
	Concurrency int `json:"concurrency"`
	// Single and Fleet are successes per second (sustained).
	Single float64 `json:"single_per_s"`
	Fleet  float64 `json:"fleet_per_s"`
	Ratio  float64 `json:"ratio"`
	// SingleP99 and FleetP99 are client latencies, ms.
	SingleP50 float64 `json:"single_p50_ms"`
	SingleP99 float64 `json:"single_p99_ms"`
	FleetP50  float64 `json:"fleet_p50_ms"`
	FleetP99  float64 `json:"fleet_p99_ms"`
	// CPU per successful request, ms: the single verifyd; the fleet's
	// verifyds together; PostgreSQL (every server process).
	SingleCPUms   float64 `json:"single_cpu_ms"`
	FleetCPUms    float64 `json:"fleet_verifyd_cpu_ms"`
	PostgresCPUms float64 `json:"postgres_cpu_ms"`
	// PostgresCores is PostgreSQL's CPU over the load's wall time.
	PostgresCores float64 `json:"postgres_cores"`
	// RoundTrips is the boxes' exchanges with the database per
	// successful request (verifyd_storage_pg_round_trips_total; absent
	// when the binary does not count them); Statements where the
	// database's time went, per request (pg_stat_statements).
	RoundTrips float64       `json:"round_trips,omitempty"`
	Statements []PGStatement `json:"statements,omitempty"`
	Errors     string        `json:"errors,omitempty"`
}

// FleetBatch is one batch on the single box and on the fleet.
type FleetBatch struct {
	Size         int     `json:"size"`
	Single       float64 `json:"single_completion_s"`
	Fleet        float64 `json:"fleet_completion_s"`
	Ratio        float64 `json:"ratio"`
	Single99     float64 `json:"single_99pct_s"`
	Fleet99      float64 `json:"fleet_99pct_s"`
	PostgresCPUs float64 `json:"postgres_cpu_s"`
	// PostgresCPUPerAddrMs is PostgreSQL's CPU per address of the batch.
	PostgresCPUPerAddrMs float64 `json:"postgres_cpu_per_address_ms"`
	// RoundTrips and Statements are per address, as FleetPair's.
	RoundTrips float64       `json:"round_trips,omitempty"`
	Statements []PGStatement `json:"statements,omitempty"`
	Error      string        `json:"error,omitempty"`
}

func (r *runner) scenarioFleet(ctx context.Context) error {
	fr := &FleetResult{Boxes: FleetBoxes}
	r.res.Fleet = fr
	single := r.vds[0]
	srv, err := pgtest.Launch(pgStatSettings...)
	if err != nil {
		fr.Skipped = err.Error()
		r.logf("fleet: skipped: %v", err)
		return nil
	}
	defer srv.Stop()
	r.logf("fleet: PostgreSQL (pid %d) on 127.0.0.1:%d", srv.PID(), srv.Port)
	if err := srv.CreateDatabase(ctx, "fleet"); err != nil {
		return err
	}
	dsn := srv.DSN("fleet")
	if _, err := postgres.MigrateDSN(ctx, dsn); err != nil {
		return err
	}
	stats, err := openPGStats(ctx, dsn)
	if err != nil {
		// The figures stand without the breakdown.
		r.logf("fleet: no pg_stat_statements: %v", err)
	}
	defer stats.close()
	r.pgStats = stats
	var boxes []*Verifyd
	defer func() {
		for _, b := range boxes {
			b.Stop()
		}
	}()
	for i := range FleetBoxes {
		cfg := r.o.Config
		cfg.DNS, cfg.SMTPPort = r.world.DNS, r.world.SMTPPort
		// Egress addresses of their own, apart from the single boxes'.
		cfg.Egress = EgressRange(netip.MustParseAddr(fmt.Sprintf("127.0.%d.2", 40+i)), len(r.o.Config.Egress))
		cfg.DSN, cfg.Box, cfg.Follower = dsn, "box"+strconv.Itoa(i+1), i > 0
		// A metrics listener of its own: the round trips are read there.
		port, err := freePort()
		if err != nil {
			return err
		}
		cfg.Metrics = fmt.Sprintf("127.0.0.1:%d", port)
		v, err := StartVerifyd(ctx, r.procs, "F"+strconv.Itoa(i+1), r.runs[0].Binary, filepath.Join(r.work, "fleet-"+strconv.Itoa(i+1)), cfg)
		if err != nil {
			return err
		}
		if i == 0 {
			if err := v.SetCredits(ctx, r.o.Credits); err != nil {
				return err
			}
		} else {
			v.Key, v.Account = boxes[0].Key, boxes[0].Account
		}
		boxes = append(boxes, v)
		r.logf("fleet: verifyd %s (pid %d) on %s", v.Label, v.Proc.PID, v.Base)
	}
	pgPID := srv.PID()

	// Fresh probes: the same number of new addresses for each side.
	c := r.o.FleetConcurrency
	n := min(r.o.FreshCount, len(r.pool)/4)
	fr.Fresh = &FleetPair{Concurrency: c}
	// What a running fleet costs, not one starting: each side first
	// validates a fifth as many other new addresses, unmeasured. A box
	// opens its connections to the database as its load needs them, and
	// each costs the server a backend (a fork, its caches filled) and a
	// plan of every statement: measured from a cold start, about a tenth
	// of the database's CPU in the short run's load, a share that depends
	// on how long the load is, not on what a validation costs.
	warm := max(n/5, c)
	r.freshLoad(ctx, single, "fleet-single-warm", c, r.take(warm), time.Minute, false)
	r.fleetLoads(ctx, boxes, pgPID, c, r.take(warm), func(v *Verifyd, c int, part []string) Level {
		lv, _ := r.freshLoad(ctx, v, "fleet-warm", c, part, time.Minute, true)
		return lv
	})
	pause(ctx)
	for _, side := range r.fleetOrder() {
		emails := r.take(n)
		if side == "single" {
			lv, _ := r.freshLoad(ctx, single, "fleet-single-fresh", c, emails, r.o.FreshDuration, false)
			fr.Fresh.single(lv)
		} else {
			fr.Fresh.fleet(r.fleetLoads(ctx, boxes, pgPID, c, emails, func(v *Verifyd, c int, part []string) Level {
				lv, _ := r.freshLoad(ctx, v, "fleet-fresh", c, part, r.o.FreshDuration, true)
				return lv
			}))
		}
		pause(ctx)
	}
	fr.Fresh.finish()
	r.logf("fleet fresh c=%d: single %.0f/s, fleet of %d %.0f/s (%.2f×); PostgreSQL %.3f ms CPU a probe",
		c, fr.Fresh.Single, FleetBoxes, fr.Fresh.Fleet, fr.Fresh.Ratio, fr.Fresh.PostgresCPUms)

	// cache:true hits: each side first validates the same addresses
	// fresh (unmeasured), then asks for them again with cache: true.
	// verifyd does not cache unknown verdicts: those addresses leave the
	// seed.
	_, outs := r.freshLoad(ctx, single, "fleet-cache-seed", 64, r.take(min(1000, n)), time.Minute, false)
	var seed []string
	for _, o := range outs {
		if o.OK && o.Status != "unknown" {
			seed = append(seed, o.Email)
		}
	}
	if len(seed) == 0 {
		fr.Error = "no address of the cache seed has a cacheable result"
		return nil
	}
	r.fleetLoads(ctx, boxes, pgPID, 64, seed, func(v *Verifyd, c int, part []string) Level {
		lv, _ := r.freshLoad(ctx, v, "fleet-cache-seed", c, part, time.Minute, true)
		return lv
	})
	cc := r.o.CacheLevels[len(r.o.CacheLevels)-1]
	fr.Cache = &FleetPair{Concurrency: cc}
	for _, side := range r.fleetOrder() {
		if side == "single" {
			fr.Cache.single(r.cacheLoad(ctx, single, "fleet-cache", cc, seed, false))
		} else {
			fr.Cache.fleet(r.fleetLoads(ctx, boxes, pgPID, cc, seed, func(v *Verifyd, c int, part []string) Level {
				return r.cacheLoad(ctx, v, "fleet-cache", c, part, true)
			}))
		}
		pause(ctx)
	}
	fr.Cache.finish()
	r.logf("fleet cache c=%d: single %.0f/s, fleet of %d %.0f/s (%.2f×); PostgreSQL %.3f ms CPU a hit",
		cc, fr.Cache.Single, FleetBoxes, fr.Cache.Fleet, fr.Cache.Ratio, fr.Cache.PostgresCPUms)

	// A batch: the same addresses on each side, uploaded to the first box
	// (the boxes split it between them).
	size := min(r.o.FleetBatchSize, len(r.pool))
	emails := make([]string, size)
	copy(emails, r.pool)
	fb := &FleetBatch{Size: size}
	fr.Batch = fb
	for _, side := range r.fleetOrder() {
		v := single
		if side != "single" {
			v = boxes[0]
		}
		before := treeCPU(pgPID)
		var trips float64
		if side != "single" {
			r.pgStats.reset(ctx)
			trips = roundTrips(boxes)
		}
		rb, err := r.uploadBatch(ctx, v, emails)
		if err != nil {
			return err
		}
		if rb.res.Error == "" && rb.res.Skipped == "" {
			rb.wait(ctx, r.o.BatchTimeout)
		}
		res := rb.res
		if res.Error != "" || res.Skipped != "" {
			fb.Error = side + ": " + res.Error + res.Skipped
			break
		}
		if side == "single" {
			fb.Single, fb.Single99 = res.CompletionSeconds, res.Seconds99
		} else {
			fb.Fleet, fb.Fleet99 = res.CompletionSeconds, res.Seconds99
			fb.PostgresCPUs = round3((treeCPU(pgPID) - before).Seconds())
			fb.PostgresCPUPerAddrMs = round3(fb.PostgresCPUs * 1000 / float64(size))
			fb.Statements = r.pgStats.read(ctx, size)
			if after := roundTrips(boxes); trips >= 0 && after >= 0 {
				fb.RoundTrips = round3((after - trips) / float64(size))
			}
		}
		pause(ctx)
	}
	if fb.Single > 0 {
		fb.Ratio = round3(fb.Fleet / fb.Single)
	}
	r.logf("fleet batch of %d: single %.1f s, fleet of %d %.1f s (%.2f×); PostgreSQL %.3f ms CPU an address",
		size, fb.Single, FleetBoxes, fb.Fleet, fb.Ratio, fb.PostgresCPUPerAddrMs)
	return nil
}

// fleetOrder alternates which side goes first from run to run of the
// process (the machine warms up).
func (r *runner) fleetOrder() []string {
	r.fleetFlip = !r.fleetFlip
	if r.fleetFlip {
		return []string{"single", "fleet"}
	}
	return []string{"fleet", "single"}
}

// fleetLoad is a load on the fleet's boxes: a level per box, and the
// database's side.
type fleetLoad struct {
	levels []Level
	// pgCPU is PostgreSQL's CPU over the load, wall its duration.
	pgCPU, wall time.Duration
	// trips is the boxes' round trips to the database over the load
	// (-1: not counted); stmts the statements per request (nil without
	// pg_stat_statements).
	trips float64
	stmts []PGStatement
}

// fleetLoads runs load on every box at once, each with c/boxes workers
// and its share of emails.
func (r *runner) fleetLoads(ctx context.Context, boxes []*Verifyd, pgPID, c int, emails []string, load func(*Verifyd, int, []string) Level) fleetLoad {
	levels := make([]Level, len(boxes))
	meters := make([]*Meter, len(boxes))
	for i, b := range boxes {
		meters[i] = StartMeter(b.Proc.PID)
	}
	r.pgStats.reset(ctx)
	trips := roundTrips(boxes)
	before, t0 := treeCPU(pgPID), time.Now()
	var wg sync.WaitGroup
	for i, b := range boxes {
		part := emails[i*len(emails)/len(boxes) : (i+1)*len(emails)/len(boxes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			levels[i] = load(b, max(c/len(boxes), 1), part)
		}()
	}
	wg.Wait()
	fl := fleetLoad{levels: levels, pgCPU: treeCPU(pgPID) - before, wall: time.Since(t0), trips: -1}
	ok := 0
	for i, m := range meters {
		u := m.Stop()
		levels[i].Verifyd = procUsage(u, levels[i].OK, true)
		ok += levels[i].OK
	}
	if after := roundTrips(boxes); trips >= 0 && after >= 0 {
		fl.trips = after - trips
	}
	fl.stmts = r.pgStats.read(ctx, ok)
	return fl
}

// cacheLoad asks v for emails with cache: true at concurrency c (a load
// named name) and measures it; an answer not from the cache is a failure.
func (r *runner) cacheLoad(ctx context.Context, v *Verifyd, name string, c int, emails []string, nested bool) Level {
	bodies := validateBodies(emails, true)
	client := NewClient(v.Addr, c, r.o.RequestTimeout)
	defer client.CloseIdleConnections()
	cached := []byte(`"cached":true`)
	l := Load{
		Name:   name,
		Client: client, Path: "/v1/validate", Key: v.Key,
		Concurrency: c, Count: r.o.CacheCount, Duration: r.o.CacheDuration, Timeout: r.o.RequestTimeout,
		Body: func(i int) []byte { return bodies[i%len(bodies)] },
		Check: func(_, status int, body []byte, _ time.Duration) string {
			switch {
			case status != http.StatusOK:
				return httpFailure(status, body)
			case !bytes.Contains(body, cached):
				return "HTTP 200 but not from the cache"
			}
			return ""
		},
	}
	lv, _ := r.measured(ctx, v, l, nested)
	return lv
}

// rate is a level's sustained throughput, or its overall one when the
// load was too short to sustain (every request sent at once).
func rate(lv Level) float64 {
	if lv.Throughput > 0 {
		return lv.Throughput
	}
	return lv.OverallThroughput
}

func (p *FleetPair) single(lv Level) {
	p.Single, p.SingleP50, p.SingleP99 = rate(lv), lv.Latency.P50, lv.Latency.P99
	p.SingleCPUms = lv.Verifyd.CPUPerRequestMs
	if len(lv.Errors) > 0 {
		p.Errors += "single: " + errSummary(lv.Errors)
	}
}

// fleet sums the boxes' throughputs and CPU; the latencies are the
// slowest box's.
func (p *FleetPair) fleet(fl fleetLoad) {
	ok, cpu := 0, 0.0
	for _, lv := range fl.levels {
		p.Fleet += rate(lv)
		p.FleetP50 = max(p.FleetP50, lv.Latency.P50)
		p.FleetP99 = max(p.FleetP99, lv.Latency.P99)
		ok += lv.OK
		cpu += lv.Verifyd.CPUSeconds
		if len(lv.Errors) > 0 {
			p.Errors += "fleet: " + errSummary(lv.Errors)
		}
	}
	p.Fleet = round3(p.Fleet)
	if ok > 0 {
		p.FleetCPUms = round3(cpu * 1000 / float64(ok))
		p.PostgresCPUms = round3(fl.pgCPU.Seconds() * 1000 / float64(ok))
		if fl.trips >= 0 {
			p.RoundTrips = round3(fl.trips / float64(ok))
		}
	}
	if fl.wall > 0 {
		p.PostgresCores = round3(fl.pgCPU.Seconds() / fl.wall.Seconds())
	}
	p.Statements = fl.stmts
}

func (p *FleetPair) finish() {
	if p.Single > 0 {
		p.Ratio = round3(p.Fleet / p.Single)
	}
}

// treeCPU is the CPU time of process pid and its children (PostgreSQL's
// postmaster and its backends), from /proc; children that exited count
// through the parent's cutime and cstime.
func treeCPU(pid int) time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) in ")".
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if p != pid && ppid != pid {
			continue
		}
		for _, k := range []int{11, 12} { // utime, stime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += v
		}
		if p == pid {
			for _, k := range []int{13, 14} { // cutime, cstime
				v, _ := strconv.ParseInt(f[k], 10, 64)
				ticks += v
			}
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
