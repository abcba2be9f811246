package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// The dashboard's users and invitations (server/web).

func usersAdd(c *cli, args []string) error {
	cmd := this("users", "add")
	fs := c.flagSet("users add")
	operator := fs.Bool("operator", false, "grant the operator view (egress pool, every account)")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	// The password comes on standard input, never on the command line,
	// where ps and the shell's history would show it.
	line, err := bufio.NewReader(c.stdin).ReadString('\n')
	if err != nil && line == "" {
		return &usageError{msg: "the password is read from standard input: none was given", usage: cmd.usageLine()}
	}
	pw := strings.TrimRight(line, "\r\n")
	var u adminapi.User
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		u, err = ac.AddUser(ctx, adminapi.AddUser{Email: pos[0], Password: pw, Operator: *operator})
		return err
	})
	if err != nil {
		return err
	}
	return c.showUser(u)
}

func (c *cli) showUser(u adminapi.User) error {
	if c.json {
		return c.printJSON(u)
	}
	return c.printKV("id", u.ID, "email", u.Email, "operator", fmt.Sprint(u.Operator),
		"accounts", orDash(memberships(u.Accounts)), "created", ts(u.Created))
}

func memberships(ms []adminapi.Membership) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, m.Account+" ("+m.Role+")")
	}
	return strings.Join(parts, ", ")
}

func usersList(c *cli, args []string) error {
	cmd := this("users", "list")
	if _, err := c.parse(c.flagSet("users list"), cmd, args, 0, 0); err != nil {
		return err
	}
	var us []adminapi.User
	err := c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		us, err = ac.Users(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(adminapi.UserList{Users: us})
	}
	if len(us) == 0 {
		fmt.Fprintln(c.stdout, "no users (add one with: verifyctl users add EMAIL < password-file)")
		return nil
	}
	rows := make([][]string, 0, len(us))
	for _, u := range us {
		op := "-"
		if u.Operator {
			op = "yes"
		}
		rows = append(rows, []string{u.ID, u.Email, op, ts(u.Created), orDash(memberships(u.Accounts))})
	}
	return c.printTable([]string{"ID", "EMAIL", "OPERATOR", "CREATED", "ACCOUNTS"}, rows)
}

func usersOperator(c *cli, args []string) error {
	cmd := this("users", "operator")
	pos, err := c.parse(c.flagSet("users operator"), cmd, args, 2, 2)
	if err != nil {
		return err
	}
	var on bool
	switch pos[1] {
	case "on":
		on = true
	case "off":
	default:
		return &usageError{msg: fmt.Sprintf("want on or off, not %q", pos[1]), usage: cmd.usageLine()}
	}
	var u adminapi.User
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		u, err = ac.SetOperator(ctx, pos[0], on)
		return err
	})
	if err != nil {
		return err
	}
	return c.showUser(u)
}

func accountsInvite(c *cli, args []string) error {
	cmd := this("accounts", "invite")
	fs := c.flagSet("accounts invite")
	role := fs.String("role", "owner", "`role` in the account: owner or member")
	email := fs.String("email", "", "only this `email` may redeem it")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var iv adminapi.Invite
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		iv, err = ac.CreateInvite(ctx, pos[0], adminapi.CreateInvite{Role: *role, Email: *email})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stderr, "verifyctl: give this invitation to its user now: it is shown only this once; it is redeemed at registration or with POST /auth/link.")
	if c.json {
		return c.printJSON(iv)
	}
	return c.printKV("invitation", iv.Token, "id", iv.ID, "account", iv.Account, "role", iv.Role,
		"email", orDash(iv.Email), "expires", ts(iv.ExpiresAt))
}

func accountsInvites(c *cli, args []string) error {
	cmd := this("accounts", "invites")
	pos, err := c.parse(c.flagSet("accounts invites"), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var ivs []adminapi.Invite
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		ivs, err = ac.Invites(ctx, pos[0])
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(adminapi.InviteList{Invites: ivs})
	}
	if len(ivs) == 0 {
		fmt.Fprintf(c.stdout, "no pending invitations (make one with: verifyctl accounts invite %s)\n", pos[0])
		return nil
	}
	rows := make([][]string, 0, len(ivs))
	for _, iv := range ivs {
		rows = append(rows, []string{iv.ID, iv.Role, orDash(iv.Email), iv.CreatedBy, ts(iv.CreatedAt), ts(iv.ExpiresAt)})
	}
	return c.printTable([]string{"ID", "ROLE", "EMAIL", "BY", "CREATED", "EXPIRES"}, rows)
}
