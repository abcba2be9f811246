package harness

import "testing"

func TestParseTop(t *testing.T) {
	out := []byte(`File: verifyd
Type: cpu
Duration: 6s, Total samples = 2.05s (34.16%)
Showing nodes accounting for 1.14s, 55.61% of 2.05s total
      flat  flat%   sum%        cum   cum%
         0     0%     0%      1.91s 93.20%  runtime.goexit
         0     0%     0%      0.91s 44.39%  github.com/verifyd/verifyd/probe.(*Pools).Verify.func1
         0     0%     0%      0.91s 44.39%  github.com/verifyd/verifyd/probe.(*Engine).Verify
         0     0%     0%      0.45s 21.95%  github.com/verifyd/verifyd/server.New.(*Server).guard.func7
     0.02s  0.98% 26.83%      0.32s 15.61%  github.com/verifyd/verifyd/storage.(*DB).charge
     0.51s 24.88% 25.85%      0.51s 24.88%  internal/runtime/syscall/linux.Syscall6
`)
	header, rows := parseTop(out, true)
	if header != "Duration: 6s, Total samples = 2.05s (34.16%)" {
		t.Errorf("header %q", header)
	}
	if len(rows) != 2 || rows[0].Func != "github.com/verifyd/verifyd/probe.(*Engine).Verify" || rows[0].CumPct != 44.39 ||
		rows[1].Func != "github.com/verifyd/verifyd/storage.(*DB).charge" || rows[1].FlatPct != 0.98 {
		t.Errorf("paths %+v", rows)
	}
	_, rows = parseTop(out, false)
	if len(rows) != 6 || rows[5].FlatPct != 24.88 {
		t.Errorf("hot spots %+v", rows)
	}
}
