package world

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/server/outcomes"
)

// sentDeliveries sends to every address of the test world that a server
// answers, at one time, and returns what happened.
func sentDeliveries(t *testing.T) []Delivery {
	t.Helper()
	w := deliveryWorld(t)
	var ds []Delivery
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, d := range w.Domains {
		for _, lp := range []string{"ann", "zed", "full", "quota", "off"} {
			ds = append(ds, w.Deliver(lp+"@"+d.Name, start.Add(time.Duration(i)*time.Second)))
		}
	}
	w.ComplaintRate = 1 // every delivery to a mailbox complains
	ds = append(ds, w.Deliver("ann@plain.test", start))
	// The same address sent to twice is two deliveries.
	ds = append(ds, w.Deliver("ann@plain.test", start.Add(24*time.Hour)))
	return ds
}

func TestSendGridEvents(t *testing.T) {
	ds := sentDeliveries(t)
	body := SendGridEvents(ds)
	if !bytes.Equal(body, SendGridEvents(ds)) {
		t.Fatal("the same deliveries rendered differently")
	}
	var evs []map[string]any
	if err := json.Unmarshal(body, &evs); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, body)
	}
	if len(evs) != len(ds) {
		t.Fatalf("%d events for %d deliveries", len(evs), len(ds))
	}
	ids := map[string]bool{}
	kinds := map[string]int{}
	for i, ev := range evs {
		d := ds[i]
		str := func(k string) string {
			s, _ := ev[k].(string)
			return s
		}
		for _, k := range []string{"email", "timestamp", "event", "sg_event_id", "sg_message_id"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("event %d (%s %s): no %s: %v", i, d.Email, d.Event, k, ev)
			}
		}
		if str("email") != d.Email || ev["timestamp"] != float64(d.At.Unix()) {
			t.Errorf("event %d: email %v at %v, want %s at %d", i, ev["email"], ev["timestamp"], d.Email, d.At.Unix())
		}
		id := str("sg_event_id")
		if len(id) != 22 || ids[id] {
			t.Errorf("event %d: sg_event_id %q is not 22 characters or not unique", i, id)
		}
		ids[id] = true
		kind := str("event") + "/" + str("type")
		kinds[kind]++
		switch d.Event {
		case EventDelivered:
			if kind != "delivered/" || !strings.HasPrefix(str("response"), "250") || !strings.HasPrefix(str("smtp-id"), "<") {
				t.Errorf("event %d: a delivery rendered %v", i, ev)
			}
		case EventHardBounce, EventSoftBounce:
			want := "bounce/bounce"
			if d.Event == EventSoftBounce {
				want = "bounce/blocked"
			}
			if kind != want || str("status") != d.Enhanced || str("reason") != d.Diagnostic || str("reason") == "" {
				t.Errorf("event %d: %s %s %s rendered %v, want %s", i, d.Event, d.Enhanced, d.Diagnostic, ev, want)
			}
		case EventComplaint:
			if kind != "spamreport/" {
				t.Errorf("event %d: a complaint rendered %v", i, ev)
			}
		}
	}
	for _, k := range []string{"delivered/", "bounce/bounce", "bounce/blocked", "spamreport/"} {
		if kinds[k] == 0 {
			t.Errorf("no %s event: %v", k, kinds)
		}
	}
}

func TestOutcomeLines(t *testing.T) {
	ds := sentDeliveries(t)
	body := OutcomeLines(ds)
	if !bytes.Equal(body, OutcomeLines(ds)) {
		t.Fatal("the same deliveries rendered differently")
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != len(ds) {
		t.Fatalf("%d lines for %d deliveries", len(lines), len(ds))
	}
	ids := map[string]bool{}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i+1, err, l)
		}
		d := ds[i]
		for k := range m {
			if !strings.Contains(" event_id email event time smtp_code enhanced_code diagnostic ", " "+k+" ") {
				t.Errorf("line %d: field %s is not POST /v1/outcomes'", i+1, k)
			}
		}
		id, _ := m["event_id"].(string)
		if id != d.EventID() || id == "" || ids[id] {
			t.Errorf("line %d: event_id %q is not the delivery's or not unique", i+1, id)
		}
		ids[id] = true
		at, err := time.Parse(time.RFC3339, m["time"].(string))
		if err != nil || !at.Equal(d.At.Truncate(time.Second)) {
			t.Errorf("line %d: time %v, want %s", i+1, m["time"], d.At.Format(time.RFC3339))
		}
		if m["email"] != d.Email || m["event"] != d.Event {
			t.Errorf("line %d: %v %v, want %s %s", i+1, m["email"], m["event"], d.Email, d.Event)
		}
		if d.Event == EventHardBounce && (m["enhanced_code"] != d.Enhanced || m["diagnostic"] != d.Diagnostic) {
			t.Errorf("line %d: a bounce without its codes: %s", i+1, l)
		}
		if _, ok := m["smtp_code"]; ok != (d.SMTPCode != 0) {
			t.Errorf("line %d: smtp_code present %t, code %d", i+1, ok, d.SMTPCode)
		}
	}
	// verifyd takes the body whole.
	outs, issues := outcomes.Parse(outcomes.FormatJSONLines, body)
	if len(issues) > 0 || len(outs) != len(ds) {
		t.Fatalf("verifyd refuses the outcomes (%d of %d taken): %v", len(outs), len(ds), issues)
	}
	for i, o := range outs {
		if o.EventID != ds[i].EventID() || o.Event != ds[i].Event || o.Enhanced != ds[i].Enhanced {
			t.Errorf("verifyd read line %d as %+v", i+1, o)
		}
	}
}

// TestBouncesAfterAcceptanceReadAsNoMailbox: what the world's servers say
// when they bounce what they accepted is read by verifyd as "no such
// mailbox", in every provider's wording, so a benchmark of learning from
// outcomes measures the learning, not the wording.
func TestBouncesAfterAcceptanceReadAsNoMailbox(t *testing.T) {
	w := deliveryWorld(t)
	for _, email := range []string{"zed@atb.test", "zed@yahoo.test", "zed@m365.test", "zed@pp.test", "zed@plain.test", "zed@gmail.test", "zed@dbeb.test"} {
		d := w.Deliver(email, time.Time{})
		if d.Event != EventHardBounce {
			t.Fatalf("%s: %s", email, d.Event)
		}
		if !probe.BounceNoMailbox(d.SMTPCode, d.Enhanced, d.Diagnostic, d.Host) {
			t.Errorf("%s: verifyd does not read %d %s %q from %s as no such mailbox", email, d.SMTPCode, d.Enhanced, d.Diagnostic, d.Host)
		}
	}
	// A disabled mailbox or a full one is no unknown mailbox.
	for _, email := range []string{"off@plain.test", "full@gmail.test", "quota@plain.test"} {
		d := w.Deliver(email, time.Time{})
		if probe.BounceNoMailbox(d.SMTPCode, d.Enhanced, d.Diagnostic, d.Host) {
			t.Errorf("%s: verifyd reads %d %s %q as no such mailbox", email, d.SMTPCode, d.Enhanced, d.Diagnostic)
		}
	}
}
