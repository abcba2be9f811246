package admin

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// MaxSocketPath is the longest unix socket path Linux accepts: sun_path is
// 108 bytes with the terminating NUL.
const MaxSocketPath = 107

// listenSocket makes the socket at path with mode 0600 and no window in
// which it is reachable with a looser mode:
//
//  1. the parent directory is created with mode 0700 when missing (an
//     existing one is left as it is: /run/verifyd belongs to systemd);
//  2. a stale socket at path is removed, after checking that nobody
//     answers on it; a live one, or anything not a socket, is an error;
//  3. the socket is bound in a new mode-0700 directory beside path, set to
//     0600, and renamed to path (a rename keeps the bound socket), so no
//     other user can connect before the mode is right whatever the umask;
//  4. when that temporary name would be too long for sun_path, the socket
//     is bound at path and chmod-ed at once, relying on the umask for the
//     instant in between.
//
// It returns the listener, which does not unlink on Close (Shutdown removes
// the socket if it is still this one), and the socket's FileInfo.
func listenSocket(path string) (*net.UnixListener, os.FileInfo, error) {
	if path == "" {
		return nil, nil, errors.New("admin: no socket path")
	}
	if len(path) > MaxSocketPath {
		return nil, nil, fmt.Errorf("admin: socket path %s is %d bytes, over the %d a unix socket can have", path, len(path), MaxSocketPath)
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("admin: cannot create socket directory: %w", err)
		}
	} else if err != nil {
		return nil, nil, fmt.Errorf("admin: socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, nil, err
	}
	ln, err := bindPrivate(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("admin: socket vanished after creation: %w", err)
	}
	return ln, fi, nil
}

// removeStale removes a socket at path that nobody answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("admin: %s exists and is not a socket; not replacing it", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("admin: %s is in use: another process answers on it (is verifyd already running?)", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("admin: cannot tell whether %s is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("admin: cannot remove stale socket: %w", err)
	}
	return nil
}

// bindPrivate binds the socket (steps 3 and 4 of listenSocket).
func bindPrivate(path string) (*net.UnixListener, error) {
	tmpDir, err := os.MkdirTemp(filepath.Dir(path), ".a")
	if err != nil {
		return nil, fmt.Errorf("admin: cannot create socket: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	if len(tmp) > MaxSocketPath {
		return bindAt(path, path)
	}
	ln, err := bindAt(tmp, path)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin: cannot move socket into place: %w", err)
	}
	return ln, nil
}

// bindAt listens on a socket at at, mode 0600; path names it in errors.
func bindAt(at, path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: at, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("admin: cannot listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(at, 0o600); err != nil {
		ln.Close()
		os.Remove(at)
		return nil, fmt.Errorf("admin: cannot set the mode of %s: %w", path, err)
	}
	return ln, nil
}

// removeSocket removes the socket at path if it is still the file Listen
// made (a newer verifyd may have replaced it).
func removeSocket(path string, made os.FileInfo) {
	fi, err := os.Lstat(path)
	if err == nil && made != nil && os.SameFile(fi, made) {
		os.Remove(path)
	}
}
