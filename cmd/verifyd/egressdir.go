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
// netip.ParseAddr accepts; its content is ignored (the verifyd-egress@
// units write a comment there). Names starting with "." are skipped, so a
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
