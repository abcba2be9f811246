package main

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// TestEgressDrainEnable: the admin socket's drain and enable (verifyctl
// egress drain|enable, and the dashboard's operator view over the same
// code): a drained address starts no session and stays drained across a
// restart; enable puts it back; an unknown address is 404, a malformed
// one 400.
func TestEgressDrainEnable(t *testing.T) {
	run := testWorld(t, 0)
	dir := t.TempDir()
	cfg := worldConfig(run, "")
	in := startIn(t, dir, cfg)
	c := &client{t: t, base: in.base, key: in.key}
	ctx := context.Background()
	ac := adminClient(t, in)
	type status struct {
		Addr           string `json:"addr"`
		Sessions       int    `json:"sessions"`
		Disabled       bool   `json:"disabled"`
		DisabledReason string `json:"disabled_reason"`
	}
	get := func(ac *adminapi.Client, addr string) status {
		t.Helper()
		var st []status
		if err := ac.Do(ctx, http.MethodGet, "/v1/egress", nil, &st); err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Addr == addr {
				return s
			}
		}
		t.Fatalf("no %s in %+v", addr, st)
		return status{}
	}
	var st status
	if err := ac.Do(ctx, http.MethodPost, "/v1/egress/127.0.0.2/drain", nil, &st); err != nil || !st.Disabled || st.DisabledReason != "drained by an operator" {
		t.Fatalf("drain: %+v %v", st, err)
	}
	before := get(ac, "127.0.0.2").Sessions
	for _, e := range []string{"ann@shop.test", "info@shop.test", "x@catch.test", "y@catch.test"} {
		if r := c.do("POST", "/v1/validate", c.key, `{"email":"`+e+`"}`); r.status != 200 {
			t.Fatalf("%s: %d %s", e, r.status, r.body)
		}
	}
	if after := get(ac, "127.0.0.2").Sessions; after != before {
		t.Fatalf("the drained address started %d sessions", after-before)
	}
	var ae *adminapi.Error
	if err := ac.Do(ctx, http.MethodPost, "/v1/egress/127.0.0.9/drain", nil, nil); !errors.As(err, &ae) || ae.Code != adminapi.CodeNotFound {
		t.Fatalf("unknown address: %v", err)
	}
	if err := ac.Do(ctx, http.MethodPost, "/v1/egress/not-an-ip/enable", nil, nil); !errors.As(err, &ae) || ae.Code != adminapi.CodeBadRequest {
		t.Fatalf("malformed address: %v", err)
	}

	in.cmd.Process.Signal(syscall.SIGTERM)
	in.cmd.Wait()
	in = startIn(t, dir, cfg)
	ac = adminClient(t, in)
	if s := get(ac, "127.0.0.2"); !s.Disabled {
		t.Fatalf("after a restart: %+v", s)
	}
	if err := ac.Do(ctx, http.MethodPost, "/v1/egress/127.0.0.2/enable", nil, &st); err != nil || st.Disabled {
		t.Fatalf("enable: %+v %v", st, err)
	}
}
