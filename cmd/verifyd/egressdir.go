package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
)

// readEgressDir returns the egress addresses named by the files of dir
// (egress.addresses_dir): each file's name is one address, in any form
// netip.ParseAddr accepts; its content may give the address's HELO name
// (egressHeloNames reads it). Names starting with "." are skipped, so a
// writer can create ".tmp" files and rename them into place.
//
// The addresses come back in canonical form (IPv4-mapped IPv6 as IPv4),
// sorted, each once. A missing dir, or dir "", gives none and no error: the
// units create the directory with their first address.
//
// A name that is not a usable address (not an IP, with a zone, unspecified,
// multicast) or a subdirectory is left out and named in the returned error,
// with the good addresses still returned: each file stands for one
// independent systemd unit, and one bad unit must not hold back the others.
// The caller logs the error and uses the addresses. Only when dir itself
// cannot be read are the addresses nil.
func readEgressDir(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("egress.addresses_dir: %w", err)
	}
	var addrs []netip.Addr
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		if e.IsDir() {
			errs = append(errs, fmt.Errorf("%s: is a directory, not an address file", path))
			continue
		}
		a, err := egressAddr(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("egress.addresses_dir: ignored %d file(s): %w", len(errs), errors.Join(errs...))
	}
	return out, nil
}

// egressAddr parses s as an address the egress pool accepts.
func egressAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	a = a.Unmap()
	switch {
	case a.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%s: zoned addresses cannot be egress addresses", s)
	case a.IsUnspecified():
		return netip.Addr{}, fmt.Errorf("%s: the unspecified address cannot be an egress address", s)
	case a.IsMulticast():
		return netip.Addr{}, fmt.Errorf("%s: a multicast address cannot be an egress address", s)
	}
	return a, nil
}

// egressAddresses is the egress pool's address list: egress.addresses of
// the configuration, in their order, then the addresses of
// egress.addresses_dir that the configuration does not already list. Call
// it at start (for egress.Options.Addresses) and on every reload (for
// egress.Pool.SetAddresses), after loading the configuration.
//
// Like readEgressDir it returns every usable address together with an
// error naming what it left out; log the error and use the addresses. A
// configuration that passed Validate contributes no error.
func egressAddresses(c config.Egress) ([]netip.Addr, error) {
	var out []netip.Addr
	var errs []error
	seen := map[netip.Addr]bool{}
	add := func(s string) {
		a, err := egressAddr(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("egress.addresses: %w", err))
			return
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, s := range c.Addresses {
		add(s)
	}
	fromDir, err := readEgressDir(c.AddressesDir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range fromDir {
		add(s)
	}
	return out, errors.Join(errs...)
}

// egressHeloNames are the HELO names of addresses of their own:
// egress.helo_names of the configuration, then, for the addresses it does
// not name, the "helo_name = NAME" line of each address file of
// egress.addresses_dir (the verifyd-egress@ADDR unit writes it from its
// HELO_NAME environment variable). Like egressAddresses it returns what it
// could read together with an error naming what it left out.
func egressHeloNames(c config.Egress) (map[netip.Addr]string, error) {
	out := map[netip.Addr]string{}
	for k, v := range c.HeloNames {
		if a, err := egressAddr(k); err == nil {
			out[a] = v // Validate checked both
		}
	}
	if c.AddressesDir == "" {
		return out, nil
	}
	fromDir, _ := readEgressDir(c.AddressesDir) // its errors are egressAddresses' to report
	var errs []error
	for _, s := range fromDir {
		a, _ := egressAddr(s)
		if _, ok := out[a]; ok {
			continue
		}
		path := filepath.Join(c.AddressesDir, s)
		b, err := os.ReadFile(path)
		if err != nil {
			// The file may be named in another form than canonical.
			continue
		}
		name, err := parseEgressFile(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		if name != "" {
			out[a] = name
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("egress.addresses_dir: %w", errors.Join(errs...))
	}
	return out, nil
}

// parseEgressFile reads an address file: blank lines and # comments, and
// at most one "helo_name = NAME" line (a host name).
func parseEgressFile(b []byte) (helo string, err error) {
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || k != "helo_name":
			return "", fmt.Errorf("line %d: want helo_name = NAME, not %q", i+1, line)
		case helo != "":
			return "", fmt.Errorf("line %d: a second helo_name", i+1)
		case !config.IsHostName(v):
			return "", fmt.Errorf("line %d: %q is not a host name", i+1, v)
		}
		helo = v
	}
	return helo, nil
}
