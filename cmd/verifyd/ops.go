package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/web"
)

// opsRoutes adds the operations routes to the admin API:
//
//	POST /v1/backup {"dir": "/abs/path"}  a consistent copy of the data dir
//	GET  /v1/egress                       the egress pool's health snapshot
//	POST /v1/egress/{addr}/drain          take an address out of rotation
//	POST /v1/egress/{addr}/enable         put it back
//	GET  /v1/http-routes                  the HTTP API's routes, by method
//
// The egress routes are also the dashboard's operator view (egressActions).
func (a *app) opsRoutes(dataDir string, eg web.EgressActions, api *router.Router) func(r *router.Router) {
	return func(r *router.Router) {
		r.GET("/v1/http-routes", admin.JSON(func(*fasthttp.RequestCtx) (any, error) { return api.List(), nil }))
		r.POST("/v1/backup", admin.JSON(func(ctx *fasthttp.RequestCtx) (any, error) {
			var req struct {
				Dir string `json:"dir"`
			}
			if err := admin.DecodeJSON(ctx, &req); err != nil {
				return nil, err
			}
			if !filepath.IsAbs(req.Dir) {
				return nil, &adminapi.Error{Code: adminapi.CodeBadRequest, Message: "dir must be an absolute path"}
			}
			if err := a.backup(dataDir, req.Dir); err != nil {
				return nil, err
			}
			return map[string]string{"dir": req.Dir}, nil
		}))
		r.GET("/v1/egress", admin.JSON(eg.List))
		r.POST("/v1/egress/{addr}/drain", admin.JSON(eg.Drain))
		r.POST("/v1/egress/{addr}/enable", admin.JSON(eg.Enable))
	}
}

// drainReason is the reason an operator's drain gives the pool.
const drainReason = "drained by an operator"

// egressActions are the egress pool's operator actions, for the admin
// socket and the dashboard's operator view alike. Drain takes the address
// out of rotation (sessions in flight finish; the flag survives a
// restart); enable puts it back, whoever took it out (a self-check that
// still fails takes it out again at its next run).
func (a *app) egressActions(log *slog.Logger) web.EgressActions {
	addrOf := func(ctx *fasthttp.RequestCtx) (netip.Addr, error) {
		s, _ := ctx.UserValue("addr").(string)
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, &adminapi.Error{Code: adminapi.CodeBadRequest, Message: "invalid request: not an IP address: " + strconv.Quote(s),
				Details: map[string]any{"issues": []adminapi.Issue{{Path: "addr", Message: "must be an IP address of the pool"}}}}
		}
		return ip, nil
	}
	status := func(ip netip.Addr) (any, error) {
		for _, s := range a.egress.Snapshot() {
			if s.Addr == ip.Unmap() {
				return s, nil
			}
		}
		return nil, &adminapi.Error{Code: adminapi.CodeNotFound, Message: "no egress address " + ip.String() + " in the pool"}
	}
	change := func(do func(netip.Addr) error, what string) admin.HandlerFunc {
		return func(ctx *fasthttp.RequestCtx) (any, error) {
			ip, err := addrOf(ctx)
			if err != nil {
				return nil, err
			}
			if err := do(ip); errors.Is(err, egress.ErrUnknownAddress) {
				return nil, &adminapi.Error{Code: adminapi.CodeNotFound, Message: "no egress address " + ip.String() + " in the pool"}
			} else if err != nil {
				return nil, err
			}
			log.Info("egress address "+what, append([]any{"addr", ip}, admin.PeerAttrs(ctx)...)...)
			return status(ip)
		}
	}
	return web.EgressActions{
		List:   func(*fasthttp.RequestCtx) (any, error) { return a.egress.Snapshot(), nil },
		Drain:  change(func(ip netip.Addr) error { return a.egress.Disable(ip, drainReason) }, "drained"),
		Enable: change(a.egress.Enable, "enabled"),
	}
}

// backup writes a consistent copy of verifyd's state into dir, which must
// not exist yet: a Pebble checkpoint of the database (taken while verifyd
// runs; every synced write before it is in it) and the signing keys.
// Restoring is starting verifyd with data_dir set to the copy.
func (a *app) backup(dataDir, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return &adminapi.Error{Code: adminapi.CodeConflict, Message: fmt.Sprintf("%s exists; name a new directory", dir)}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := a.local.Checkpoint(filepath.Join(dir, "db")); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return copyDir(filepath.Join(dataDir, "signing"), filepath.Join(dir, "signing"))
}

// copyDir copies the regular files of src into dst (created 0700), each
// synced.
func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
