package outcomes

import (
	"context"
	"sync"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/storage"
)

// models are the calibration models of every account, fitted by refit.
type models struct {
	mu sync.RWMutex
	m  map[string]*accountModels
}

// accountModels are an account's models: overall, and per provider.
type accountModels struct {
	all       *Model
	providers map[string]*Model
}

// fitCounts are the bucket counts a model is fitted to.
type fitCounts struct{ d, b [10]int }

func (c *fitCounts) add(o *storage.Outcome) {
	i := min(max(o.Verdict.Score, 0)/10, 9)
	switch {
	case deliverable(o.Event):
		c.d[i]++
	case o.Event == storage.OutcomeHardBounce:
		c.b[i]++
	}
}

func (c *fitCounts) n() int {
	n := 0
	for i := range 10 {
		n += c.d[i] + c.b[i]
	}
	return n
}

// refit fits every account's models to its matched outcomes of the last
// Window: the account's own, and each provider's that has MinOutcomes.
func (s *Service) refit(ctx context.Context) error {
	if s.opts.Calibrate == nil {
		return nil
	}
	now := s.opts.Now()
	type acc struct {
		all       fitCounts
		providers map[string]*fitCounts
	}
	byAccount := map[string]*acc{}
	err := s.opts.Calibrate.ScanOutcomes(ctx, "", now.Add(-s.opts.Window), func(o storage.Outcome) error {
		if !o.Matched() || o.At.After(now) {
			return nil
		}
		a := byAccount[o.Account]
		if a == nil {
			a = &acc{providers: map[string]*fitCounts{}}
			byAccount[o.Account] = a
		}
		a.all.add(&o)
		p := probe.ProviderOfMX(o.Verdict.MXHost)
		pc := a.providers[p]
		if pc == nil {
			pc = &fitCounts{}
			a.providers[p] = pc
		}
		pc.add(&o)
		return nil
	})
	if err != nil {
		return err
	}
	next := map[string]*accountModels{}
	for account, a := range byAccount {
		if a.all.n() < s.opts.MinCalibration {
			continue
		}
		all := Fit(a.all.d, a.all.b, now)
		am := &accountModels{all: &all, providers: map[string]*Model{}}
		for p, c := range a.providers {
			if p != probe.ProviderOther && c.n() >= s.opts.MinCalibration {
				m := Fit(c.d, c.b, now)
				m.Version = p + "@" + m.Version
				am.providers[p] = &m
			}
		}
		next[account] = am
	}
	s.models.mu.Lock()
	s.models.m = next
	s.models.mu.Unlock()
	calibratedAccounts.Set(float64(len(next)))
	refits.Inc()
	return nil
}

// model returns the model a result of the account whose MX is mxHost is
// calibrated with, nil for none.
func (s *Service) model(account, mxHost string) *Model {
	s.models.mu.RLock()
	defer s.models.mu.RUnlock()
	am := s.models.m[account]
	if am == nil {
		return nil
	}
	if m := am.providers[probe.ProviderOfMX(mxHost)]; m != nil {
		return m
	}
	return am.all
}

// Calibrate makes r's score the account's calibrated probability of
// delivery, when it has a model.
func (s *Service) Calibrate(account string, r *probe.Result) {
	m := s.model(account, r.Checks.MXHost)
	if m == nil || r.Calibration != nil {
		return
	}
	r.Calibration = &probe.Calibration{Model: m.Version, Outcomes: m.Outcomes, RawScore: r.Score}
	r.Score = m.Score(r.Score)
	calibrated.Inc()
}

// Models returns the account's models, for reports: overall (nil when
// none) and per provider.
func (s *Service) Models(account string) (*Model, map[string]*Model) {
	s.models.mu.RLock()
	defer s.models.mu.RUnlock()
	am := s.models.m[account]
	if am == nil {
		return nil, nil
	}
	return am.all, am.providers
}

// refitLoop refits every RefitEvery.
func (s *Service) refitLoop() {
	defer close(s.refitDone)
	t := time.NewTicker(s.opts.RefitEvery)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		if err := s.refit(ctx); err != nil {
			s.log.Warn("cannot fit the score calibration", "err", err)
		}
		cancel()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}
