package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// opsRoutes adds the operations routes to the admin API:
//
//	POST /v1/backup {"dir": "/abs/path"}  a consistent copy of the data dir
//	GET  /v1/egress                       the egress pool's health snapshot
func (a *app) opsRoutes(dataDir string) func(r *router.Router) {
	return func(r *router.Router) {
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
		r.GET("/v1/egress", admin.JSON(func(ctx *fasthttp.RequestCtx) (any, error) {
			return a.egress.Snapshot(), nil
		}))
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
	if err := a.db.Checkpoint(filepath.Join(dir, "db")); err != nil {
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
