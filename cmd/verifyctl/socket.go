package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
)

// SocketEnv names the environment variable that overrides the
// configuration's admin.socket.
const SocketEnv = "VERIFYD_ADMIN_SOCKET"

// systemdSocket is where verifyd's socket is under the shipped systemd
// unit (RuntimeDirectory=verifyd): verifyd derives it from
// $RUNTIME_DIRECTORY, which a shell does not have. A variable for tests.
var systemdSocket = "/run/verifyd/admin.sock"

// findSocket returns the admin socket path and where it came from: flag,
// else $VERIFYD_ADMIN_SOCKET, else the configuration as verifyd reads it.
func findSocket(flagPath, configPath string) (path, source string, err error) {
	if flagPath != "" {
		return flagPath, "from -socket", nil
	}
	if v := os.Getenv(SocketEnv); v != "" {
		return v, "from $" + SocketEnv, nil
	}
	cfg, file, err := loadConfig(configPath)
	if err != nil {
		return "", "", fmt.Errorf("cannot find the admin socket: %w\n  (give -socket PATH or set $%s)", err, SocketEnv)
	}
	path = cfg.Admin.Socket
	source = "admin.socket of " + file
	// The configuration names no socket, so verifyd derived one, maybe
	// from a $RUNTIME_DIRECTORY this shell does not have.
	derived := cfg.Admin.Socket == filepath.Join(cfg.DataDir, "admin.sock")
	if derived && !exists(path) && exists(systemdSocket) {
		return systemdSocket, systemdSocket + ", systemd's runtime directory (" + file + " names no admin.socket)", nil
	}
	return path, source, nil
}

// loadConfig reads the configuration as verifyd does: the file at path,
// or the default path when path is empty and the file exists, or else the
// embedded defaults.
func loadConfig(path string) (config.Config, string, error) {
	if path == "" {
		if _, err := os.Stat(config.DefaultPath); errors.Is(err, fs.ErrNotExist) {
			c := config.Defaults()
			c.Derive()
			return c, "verifyd's embedded defaults", nil
		}
		path = config.DefaultPath
	}
	c, err := config.Load(path)
	return c, path, err
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
