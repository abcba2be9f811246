package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

func init() {
	commands = append(commands,
		command{"backup", "", "DIR", "write a consistent copy of verifyd's data (database checkpoint and signing keys) to a new directory DIR", backup},
		command{"egress", "list", "", "each egress address: its HELO name and where it comes from, sessions in flight, recent reply classes, cooldowns per destination and their cause, health and self-check findings", egressList},
		command{"egress", "drain", "ADDR", "take egress address ADDR out of rotation: its sessions finish, no new one starts; kept across restarts until enabled", egressChange("drain")},
		command{"egress", "enable", "ADDR", "put egress address ADDR back into rotation, whoever took it out (a failing self-check takes it out again at its next run)", egressChange("enable")},
	)
}

// egressStatus is what GET /v1/egress answers per address.
type egressStatus struct {
	Addr       string                     `json:"addr"`
	HeloName   string                     `json:"helo_name"`
	HeloSource string                     `json:"helo_source"`
	InFlight   int                        `json:"in_flight"`
	Sessions   uint64                     `json:"sessions"`
	Outcomes   map[string]uint64          `json:"outcomes"`
	Recent     []struct{ Outcome string } `json:"recent"`
	Cooldowns  []struct {
		Dest    string    `json:"dest"`
		Until   time.Time `json:"until"`
		Repeats int       `json:"repeats"`
		Cause   string    `json:"cause"`
	} `json:"cooldowns"`
	PolicyBlocks   int      `json:"policy_blocks"`
	Draining       bool     `json:"draining"`
	Disabled       bool     `json:"disabled"`
	DisabledReason string   `json:"disabled_reason"`
	Findings       []string `json:"findings"`
}

// egressChange is egress drain and egress enable: the admin API's
// POST /v1/egress/{addr}/drain|enable, which the dashboard's operator
// view also calls.
func egressChange(what string) func(c *cli, args []string) error {
	return func(c *cli, args []string) error {
		cmd := this("egress", what)
		pos, err := c.parse(c.flagSet("egress "+what), cmd, args, 1, 1)
		if err != nil {
			return err
		}
		var st egressStatus
		err = c.call(func(ctx context.Context, ac *adminapi.Client) error {
			return ac.Do(ctx, http.MethodPost, "/v1/egress/"+url.PathEscape(pos[0])+"/"+what, nil, &st)
		})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(st)
		}
		state := "in rotation"
		if st.Disabled {
			state = "disabled: " + st.DisabledReason
		}
		fmt.Fprintf(c.stdout, "%s: %s\n", st.Addr, state)
		return nil
	}
}

func backup(c *cli, args []string) error {
	cmd := this("backup", "")
	pos, err := c.parse(c.flagSet("backup"), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(pos[0])
	if err != nil {
		return err
	}
	var out map[string]string
	err = c.call(func(ctx context.Context, ac *adminapi.Client) error {
		return ac.Do(ctx, http.MethodPost, "/v1/backup", map[string]string{"dir": dir}, &out)
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(out)
	}
	fmt.Fprintf(c.stdout, "backup written to %s\nrestore: stop verifyd, point data_dir at a copy of it (or copy it into data_dir), start verifyd\n", dir)
	return nil
}

func egressList(c *cli, args []string) error {
	cmd := this("egress", "list")
	if _, err := c.parse(c.flagSet("egress list"), cmd, args, 0, 0); err != nil {
		return err
	}
	var st []egressStatus
	err := c.call(func(ctx context.Context, ac *adminapi.Client) error {
		return ac.Do(ctx, http.MethodGet, "/v1/egress", nil, &st)
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(st)
	}
	rows := make([][]string, 0, len(st))
	for _, s := range st {
		state := "active"
		switch {
		case s.Disabled:
			state = "disabled: " + s.DisabledReason
		case s.Draining:
			state = "draining"
		}
		recent := map[string]int{}
		for _, r := range s.Recent {
			recent[r.Outcome]++
		}
		var rc []string
		for k, n := range recent {
			rc = append(rc, k+"="+strconv.Itoa(n))
		}
		sort.Strings(rc)
		var cool []string
		for _, cd := range s.Cooldowns {
			cool = append(cool, fmt.Sprintf("%s until %s (%s)", cd.Dest, cd.Until.UTC().Format(time.TimeOnly), cd.Cause))
		}
		addr := s.Addr
		if addr == "" || addr == "invalid IP" {
			addr = "(system)"
		}
		helo := s.HeloName
		if s.HeloSource != "" {
			helo += " (" + s.HeloSource + ")"
		}
		findings := "-"
		if len(s.Findings) > 0 {
			findings = strings.Join(s.Findings, "; ")
		}
		rows = append(rows, []string{addr, helo, state, strconv.Itoa(s.InFlight), strconv.FormatUint(s.Sessions, 10),
			strconv.Itoa(s.PolicyBlocks), strings.Join(rc, " "), strings.Join(cool, ", "), findings})
	}
	return c.printTable([]string{"ADDRESS", "HELO NAME", "STATE", "IN FLIGHT", "SESSIONS", "POLICY BLOCKS", "RECENT", "COOLDOWNS", "FINDINGS"}, rows)
}
