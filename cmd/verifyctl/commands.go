package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// commands is every verifyctl command, in the order help lists them. A
// later feature (egress, webhooks, backup) appends its own. It is filled
// by init because the commands look themselves up in it (this), which a
// variable initializer would make an initialization cycle.
var commands []command

func init() {
	commands = []command{
		{"accounts", "create", "--name NAME --plan PLAN [--credits N]",
			"create an account (plans: free, starter, growth, scale, enterprise)", accountsCreate},
		{"accounts", "list", "", "list every account with its plan and balance", accountsList},
		{"accounts", "show", "ID", "show one account", accountsShow},
		{"accounts", "plan", "ID PLAN", "change an account's plan", accountsPlan},
		{"accounts", "invite", "ID [--role owner|member] [--email EMAIL]",
			"make a one-time invitation to the account for the dashboard; shown once", accountsInvite},
		{"accounts", "invites", "ID", "list the account's pending invitations", accountsInvites},
		{"users", "add", "EMAIL [--operator] < PASSWORD", "add a dashboard user; the password is read from standard input", usersAdd},
		{"users", "list", "", "list the dashboard users and their accounts", usersList},
		{"users", "operator", "ID|EMAIL on|off", "grant or withdraw the dashboard's operator view", usersOperator},

		{"credits", "add", "ID N [--note TEXT]", "add N credits to the account's balance", creditsAdd},
		{"credits", "set", "ID N [--note TEXT]", "set the account's balance to N", creditsSet},
		{"credits", "show", "ID [--limit N] [--before SEQ]", "show the balance and the newest ledger entries", creditsShow},

		{"keys", "mint", "ID [--scopes validate:read,validate:write] [--label TEXT]",
			"mint an API key; it is printed once and can never be shown again", keysMint},
		{"keys", "list", "ID", "list the account's API keys (never their secrets)", keysList},
		{"keys", "revoke", "PREFIX", "revoke an API key, named by its prefix (or the whole key)", keysRevoke},

		{"webhooks", "secret", "ID", "show the account's webhook signing secret", webhooksSecret},
		{"webhooks", "rotate-secret", "ID", "replace the account's webhook signing secret", webhooksRotate},

		{"signing-keys", "rotate", "", "make a new receipt signing key active; old keys stay published", signingRotate},
		{"signing-keys", "list", "", "list the published receipt signing keys", signingList},

		{"receipt", "verify", "[--jwks FILE | --url URL] [FILE]",
			"verify a signed receipt (FILE or stdin) against verifyd's key set", receiptVerify},
	}
}

// this returns the command of group and name, for its usage line.
func this(group, name string) *command {
	for i := range commands {
		if commands[i].group == group && commands[i].name == name {
			return &commands[i]
		}
	}
	panic("verifyctl: no command " + group + " " + name)
}

// parseCount reads a credit count argument.
func parseCount(cmd *command, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, &usageError{msg: fmt.Sprintf("%q is not a whole number of credits", s), usage: cmd.usageLine()}
	}
	return n, nil
}

// --- accounts

func (c *cli) showAccount(a adminapi.Account) error {
	if c.json {
		return c.printJSON(a)
	}
	rotated := "never"
	if !a.WebhookSecretRotatedAt.IsZero() {
		rotated = ts(a.WebhookSecretRotatedAt)
	}
	return c.printKV(
		"account", a.ID,
		"name", a.Name,
		"plan", a.Plan,
		"balance", fmt.Sprint(a.Balance),
		"held", fmt.Sprint(a.Held),
		"created", ts(a.CreatedAt),
		"webhook secret rotated", rotated,
	)
}

func accountsCreate(c *cli, args []string) error {
	cmd := this("accounts", "create")
	fs := c.flagSet("accounts create")
	name := fs.String("name", "", "account `name`, 1 to 200 bytes (required)")
	plan := fs.String("plan", "", "`plan`: free, starter, growth, scale or enterprise (required)")
	credits := fs.Int64("credits", 0, "opening balance in `credits`")
	if _, err := c.parse(fs, cmd, args, 0, 0); err != nil {
		return err
	}
	if *name == "" || *plan == "" {
		return &usageError{msg: "--name and --plan are required", usage: cmd.usageLine()}
	}
	var a adminapi.Account
	err := c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		a, err = ac.CreateAccount(ctx, adminapi.CreateAccount{Name: *name, Plan: *plan, Credits: *credits})
		return err
	})
	if err != nil {
		return err
	}
	return c.showAccount(a)
}

func accountsList(c *cli, args []string) error {
	cmd := this("accounts", "list")
	if _, err := c.parse(c.flagSet("accounts list"), cmd, args, 0, 0); err != nil {
		return err
	}
	var as []adminapi.Account
	err := c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		as, err = ac.Accounts(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(adminapi.AccountList{Accounts: as})
	}
	if len(as) == 0 {
		fmt.Fprintln(c.stdout, "no accounts (create one with: verifyctl accounts create --name NAME --plan PLAN)")
		return nil
	}
	rows := make([][]string, 0, len(as))
	for _, a := range as {
		rows = append(rows, []string{a.ID, a.Plan, fmt.Sprint(a.Balance), fmt.Sprint(a.Held), ts(a.CreatedAt), a.Name})
	}
	return c.printTable([]string{"ID", "PLAN", "BALANCE", "HELD", "CREATED", "NAME"}, rows)
}

func accountsShow(c *cli, args []string) error {
	cmd := this("accounts", "show")
	pos, err := c.parse(c.flagSet("accounts show"), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var a adminapi.Account
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		a, err = ac.Account(ctx, pos[0])
		return err
	})
	if err != nil {
		return err
	}
	return c.showAccount(a)
}

func accountsPlan(c *cli, args []string) error {
	cmd := this("accounts", "plan")
	pos, err := c.parse(c.flagSet("accounts plan"), cmd, args, 2, 2)
	if err != nil {
		return err
	}
	var a adminapi.Account
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		a, err = ac.SetPlan(ctx, pos[0], pos[1])
		return err
	})
	if err != nil {
		return err
	}
	return c.showAccount(a)
}

// --- credits

func creditsAdd(c *cli, args []string) error { return adjustCredits(c, "add", args) }
func creditsSet(c *cli, args []string) error { return adjustCredits(c, "set", args) }

func adjustCredits(c *cli, verb string, args []string) error {
	cmd := this("credits", verb)
	fs := c.flagSet("credits " + verb)
	note := fs.String("note", "", "a `note` kept in the ledger entry")
	pos, err := c.parse(fs, cmd, args, 2, 2)
	if err != nil {
		return err
	}
	n, err := parseCount(cmd, pos[1])
	if err != nil {
		return err
	}
	req := adminapi.AdjustCredits{Note: *note}
	if verb == "add" {
		req.Add = &n
	} else {
		req.Set = &n
	}
	var r adminapi.CreditsChanged
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		r, err = ac.AdjustCredits(ctx, pos[0], req)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r)
	}
	change := fmt.Sprintf("added %d", r.Entry.Amount)
	if verb == "set" {
		change = fmt.Sprintf("set to %d (%s)", r.Entry.Amount, signed(r.Entry.Delta))
	}
	return c.printKV(
		"account", r.Account,
		"change", change,
		"balance", fmt.Sprint(r.Balance),
		"held", fmt.Sprint(r.Held),
		"ledger entry", fmt.Sprintf("#%d", r.Entry.Seq),
	)
}

func creditsShow(c *cli, args []string) error {
	cmd := this("credits", "show")
	fs := c.flagSet("credits show")
	limit := fs.Int("limit", 20, "show at most `n` ledger entries (1 to 1000)")
	before := fs.Uint64("before", 0, "show entries older than ledger entry `seq`")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return &usageError{msg: "--limit must be from 1 to 1000", usage: cmd.usageLine()}
	}
	var l adminapi.Ledger
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		l, err = ac.Ledger(ctx, pos[0], *limit, *before)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(l)
	}
	if err := c.printKV("account", l.Account, "balance", fmt.Sprint(l.Balance), "held", fmt.Sprint(l.Held)); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	if len(l.Entries) == 0 {
		fmt.Fprintln(c.stdout, "no ledger entries")
		return nil
	}
	rows := make([][]string, 0, len(l.Entries))
	for _, e := range l.Entries {
		rows = append(rows, []string{fmt.Sprint(e.Seq), ts(e.Time), e.Kind, fmt.Sprint(e.Amount), signed(e.Delta),
			fmt.Sprint(e.Balance), fmt.Sprint(e.Held), orDash(e.Ref), e.Note})
	}
	if err := c.printTable([]string{"SEQ", "TIME", "KIND", "AMOUNT", "DELTA", "BALANCE", "HELD", "REF", "NOTE"}, rows); err != nil {
		return err
	}
	if l.NextBefore != nil {
		fmt.Fprintf(c.stdout, "\nolder entries: verifyctl credits show %s --before %d\n", l.Account, *l.NextBefore)
	}
	return nil
}

// --- keys

func keysMint(c *cli, args []string) error {
	cmd := this("keys", "mint")
	fs := c.flagSet("keys mint")
	scopes := fs.String("scopes", "validate:read,validate:write", "comma-separated `scopes`: validate:read, validate:write, outcomes:write")
	label := fs.String("label", "", "a `label` to recognise the key by in keys list")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var list []string
	for s := range strings.SplitSeq(*scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			list = append(list, s)
		}
	}
	var k adminapi.MintedKey
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		k, err = ac.MintKey(ctx, pos[0], adminapi.MintKey{Scopes: list, Label: *label})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stderr, "verifyctl: store this key now: it is shown only this once; verifyd keeps only its hash.")
	if c.json {
		return c.printJSON(k)
	}
	return c.printKV(
		"key", k.Token,
		"prefix", k.Prefix,
		"account", k.Account,
		"scopes", strings.Join(k.Scopes, ","),
		"label", orDash(k.Label),
		"created", ts(k.CreatedAt),
	)
}

func keysList(c *cli, args []string) error {
	cmd := this("keys", "list")
	pos, err := c.parse(c.flagSet("keys list"), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var ks []adminapi.Key
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		ks, err = ac.Keys(ctx, pos[0])
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(adminapi.KeyList{Keys: ks})
	}
	if len(ks) == 0 {
		fmt.Fprintf(c.stdout, "no keys (mint one with: verifyctl keys mint %s)\n", pos[0])
		return nil
	}
	rows := make([][]string, 0, len(ks))
	for _, k := range ks {
		status := "active"
		if k.Revoked {
			status = "revoked " + ts(k.RevokedAt)
		}
		used := "never"
		if !k.LastUsed.IsZero() {
			used = ts(k.LastUsed)
		}
		rows = append(rows, []string{k.Prefix, strings.Join(k.Scopes, ","), ts(k.CreatedAt), used, status, orDash(k.Label)})
	}
	return c.printTable([]string{"PREFIX", "SCOPES", "CREATED", "LAST USED", "STATUS", "LABEL"}, rows)
}

// keyPrefix takes the prefix out of what an operator pastes: a prefix,
// svc_live_<prefix>, or a whole key. Only the prefix goes to verifyd.
func keyPrefix(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "svc_live_")
	p, _, _ := strings.Cut(s, "_")
	return p
}

func keysRevoke(c *cli, args []string) error {
	cmd := this("keys", "revoke")
	pos, err := c.parse(c.flagSet("keys revoke"), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	prefix := keyPrefix(pos[0])
	var k adminapi.Key
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		k, err = ac.RevokeKey(ctx, prefix)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(k)
	}
	fmt.Fprintf(c.stdout, "revoked key %s of account %s at %s\n", k.Prefix, k.Account, ts(k.RevokedAt))
	return nil
}

// --- webhooks

func (c *cli) showSecret(s adminapi.WebhookSecret) error {
	if c.json {
		return c.printJSON(s)
	}
	rotated := "never"
	if !s.RotatedAt.IsZero() {
		rotated = ts(s.RotatedAt)
	}
	return c.printKV("account", s.Account, "secret", s.Secret, "rotated", rotated)
}

func webhooksSecret(c *cli, args []string) error {
	cmd := this("webhooks", "secret")
	pos, err := c.parse(c.flagSet("webhooks secret"), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var s adminapi.WebhookSecret
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		s, err = ac.WebhookSecret(ctx, pos[0])
		return err
	})
	if err != nil {
		return err
	}
	return c.showSecret(s)
}

func webhooksRotate(c *cli, args []string) error {
	cmd := this("webhooks", "rotate-secret")
	pos, err := c.parse(c.flagSet("webhooks rotate-secret"), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var s adminapi.WebhookSecret
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		s, err = ac.RotateWebhookSecret(ctx, pos[0])
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stderr, "verifyctl: every webhook from now on, retries included, is signed with the new secret; give it to the account's receivers.")
	return c.showSecret(s)
}

// --- signing keys

func signingRotate(c *cli, args []string) error {
	cmd := this("signing-keys", "rotate")
	if _, err := c.parse(c.flagSet("signing-keys rotate"), cmd, args, 0, 0); err != nil {
		return err
	}
	var r adminapi.SigningKeyRotated
	err := c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		r, err = ac.RotateSigningKey(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r)
	}
	fmt.Fprintf(c.stdout, "new receipts are signed with %s; %s is retired and stays published, so its receipts keep verifying\n", r.Kid, r.Previous)
	return nil
}

func signingList(c *cli, args []string) error {
	cmd := this("signing-keys", "list")
	if _, err := c.parse(c.flagSet("signing-keys list"), cmd, args, 0, 0); err != nil {
		return err
	}
	var raw []byte
	var set adminapi.SigningKeys
	err := c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		raw, set, err = ac.SigningKeys(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return fmt.Errorf("cannot read the key set: %w", err)
		}
		_, err := fmt.Fprintf(c.stdout, "%s\n", b.Bytes())
		return err
	}
	rows := make([][]string, 0, len(set.Keys))
	for _, k := range set.Keys {
		var jwk struct {
			Kid string `json:"kid"`
			Alg string `json:"alg"`
			X   string `json:"x"`
		}
		if err := json.Unmarshal(k, &jwk); err != nil {
			return fmt.Errorf("cannot read the key set: %w", err)
		}
		status := "retired"
		if jwk.Kid == set.Active {
			status = "active"
		}
		rows = append(rows, []string{jwk.Kid, status, jwk.Alg, jwk.X})
	}
	return c.printTable([]string{"KID", "STATUS", "ALG", "PUBLIC KEY (x)"}, rows)
}
