package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/webhook/hookapi"
)

// The webhook delivery commands (server/admin serves their admin routes;
// hookapi is their wire format). They join the webhooks group of
// commands.go: this file's init runs after that one's, files being
// initialised in name order.
func init() {
	commands = append(commands,
		command{"webhooks", "deliveries", "[--account ID] [--limit N]",
			"list the events waiting for delivery and the latest attempts", webhooksDeliveries},
		command{"webhooks", "dlq", "[--account ID] [--limit N]",
			"list the dead-letter queue: events given up after 24 h (or refused by the SSRF guard)", webhooksDLQ},
		command{"webhooks", "resend", "EVENT_ID",
			"send an event of the outbox or the dead-letter queue again, now", webhooksResend},
		command{"webhooks", "test", "ACCOUNT [--url URL]",
			"fire a test event: replay the account's latest payload to its endpoint (or URL)", webhooksTest},
	)
}

func webhooksDeliveries(c *cli, args []string) error {
	cmd := this("webhooks", "deliveries")
	fs := c.flagSet("webhooks deliveries")
	account := fs.String("account", "", "only the events of this account `ID`")
	limit := fs.Int("limit", 50, "show at most `N` events and N attempts")
	if _, err := c.parse(fs, cmd, args, 0, 0); err != nil {
		return err
	}
	if *limit < 1 || *limit > 10000 {
		return &usageError{msg: "--limit must be 1 to 10000", usage: cmd.usageLine()}
	}
	var out []hookapi.Event
	var at []hookapi.Attempt
	err := c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		if out, err = hookapi.Outbox(ctx, ac, *account, *limit); err != nil {
			return err
		}
		at, err = hookapi.Attempts(ctx, ac, *account, *limit)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(struct {
			Outbox   []hookapi.Event   `json:"outbox"`
			Attempts []hookapi.Attempt `json:"attempts"`
		}{nonNil(out), nonNil(at)})
	}
	fmt.Fprintf(c.stdout, "waiting for delivery: %d\n", len(out))
	if len(out) > 0 {
		if err := c.printEvents(out, false); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.stdout, "\nlatest attempts (since verifyd started): %d\n", len(at))
	if len(at) == 0 {
		return nil
	}
	rows := make([][]string, 0, len(at))
	for _, a := range at {
		status := "-"
		if a.Status != 0 {
			status = strconv.Itoa(a.Status)
		}
		rows = append(rows, []string{ts(a.At), a.EventID, a.Type, strconv.Itoa(a.Attempt), a.Outcome, status,
			fmt.Sprintf("%d ms", a.DurationMs), orDash(a.Error), a.URL})
	}
	return c.printTable([]string{"AT", "EVENT", "TYPE", "ATTEMPT", "OUTCOME", "STATUS", "TOOK", "ERROR", "URL"}, rows)
}

func webhooksDLQ(c *cli, args []string) error {
	cmd := this("webhooks", "dlq")
	fs := c.flagSet("webhooks dlq")
	account := fs.String("account", "", "only the events of this account `ID`")
	limit := fs.Int("limit", 50, "show at most `N` events")
	if _, err := c.parse(fs, cmd, args, 0, 0); err != nil {
		return err
	}
	if *limit < 1 || *limit > 10000 {
		return &usageError{msg: "--limit must be 1 to 10000", usage: cmd.usageLine()}
	}
	var dead []hookapi.Event
	err := c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		dead, err = hookapi.DeadLetters(ctx, ac, *account, *limit)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(hookapi.EventList{Events: nonNil(dead)})
	}
	if len(dead) == 0 {
		fmt.Fprintln(c.stdout, "the dead-letter queue is empty")
		return nil
	}
	return c.printEvents(dead, true)
}

// printEvents writes events as a table; dead adds when they died.
func (c *cli) printEvents(evs []hookapi.Event, dead bool) error {
	when := "NEXT ATTEMPT"
	if dead {
		when = "DEAD SINCE"
	}
	rows := make([][]string, 0, len(evs))
	for _, e := range evs {
		t := e.NextAttempt
		if dead {
			t = e.DeadAt
		}
		last := orDash(e.LastError)
		if e.LastStatus != 0 && e.LastError == "" {
			last = "HTTP " + strconv.Itoa(e.LastStatus)
		}
		rows = append(rows, []string{e.ID, e.Account, e.Type, ts(e.CreatedAt), ts(t), strconv.Itoa(e.Attempts), last, e.URL})
	}
	return c.printTable([]string{"EVENT", "ACCOUNT", "TYPE", "CREATED", when, "ATTEMPTS", "LAST ERROR", "URL"}, rows)
}

func webhooksResend(c *cli, args []string) error {
	cmd := this("webhooks", "resend")
	pos, err := c.parse(c.flagSet("webhooks resend"), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var ev hookapi.Event
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		ev, err = hookapi.Resend(ctx, ac, pos[0])
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(ev)
	}
	return c.printKV(
		"event", ev.ID,
		"account", ev.Account,
		"type", ev.Type,
		"url", ev.URL,
		"due", ts(ev.NextAttempt)+" (now: the dispatcher sends it at once)",
		"attempts so far", strconv.Itoa(ev.Attempts),
	)
}

func webhooksTest(c *cli, args []string) error {
	cmd := this("webhooks", "test")
	fs := c.flagSet("webhooks test")
	url := fs.String("url", "", "send to this `URL` instead of the payload's own endpoint")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var r hookapi.TestResult
	err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
		r, err = hookapi.Test(ctx, ac, hookapi.TestRequest{Account: pos[0], URL: *url})
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		if err := c.printJSON(r); err != nil {
			return err
		}
	} else {
		status := "-"
		if r.Status != 0 {
			status = strconv.Itoa(r.Status)
		}
		if err := c.printKV(
			"delivered", strconv.FormatBool(r.Delivered),
			"status", status,
			"error", orDash(r.Error),
			"took", (time.Duration(r.DurationMs) * time.Millisecond).String(),
			"url", r.URL,
			"type", r.Type,
			"test event id", r.EventID,
			"replay of", r.ReplayOf,
		); err != nil {
			return err
		}
	}
	if !r.Delivered {
		return failure{}
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
