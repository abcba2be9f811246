package contract

import (
	"bytes"
	"strings"
	"testing"
)

// TestSpec7_3IdempotencyValidate checks Idempotency-Key on POST
// /v1/validate.
//
// §7 rule 3: "Optional header Idempotency-Key, 8 to 128 characters." "A
// repeat with the same key and the same body replays the original
// response and adds Idempotent-Replay: true." "The same key with a
// different body returns 409 CONFLICT." §7's table: CONFLICT details
// "field (names Idempotency-Key)". §8: "Clients are expected to ... send
// Idempotency-Key so that retries do not charge twice."
//
// Decision: a replay has the same status and body bytes, and costs
// nothing; a key of 7 or 129 characters is 400 BAD_REQUEST.
func TestSpec7_3IdempotencyValidate(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 20)
	c := newClient(t, a.mint(t))
	body := `{"email":"ann@shop.test"}`
	first := c.post("/v1/validate", body, "Idempotency-Key", "contract-validate-1").want(t, 200)
	if h := first.header.Get("Idempotent-Replay"); h != "" {
		t.Errorf("the first answer has Idempotent-Replay %q", h)
	}
	after := balance(t, c)
	for i := range 2 {
		again := c.post("/v1/validate", body, "Idempotency-Key", "contract-validate-1")
		if again.status != first.status || !bytes.Equal(again.body, first.body) {
			t.Errorf("repeat %d: %s\nfirst: %s", i, again, first)
		}
		if h := again.header.Get("Idempotent-Replay"); h != "true" {
			t.Errorf("repeat %d: Idempotent-Replay %q, want true", i, h)
		}
	}
	if b := balance(t, c); b != after || b != 19 {
		t.Errorf("balance %d after replays, want %d (charged once)", b, 19)
	}
	if err := verifyReceipt(t, c, first.body); err != nil {
		t.Error(err)
	}

	// The same key, another body.
	for _, other := range []string{`{"email":"zed@shop.test"}`, `{"email":"ann@shop.test","cache":true}`} {
		r := c.post("/v1/validate", other, "Idempotency-Key", "contract-validate-1")
		d := r.wantError(t, 409, "CONFLICT")
		if d["field"] != "Idempotency-Key" {
			t.Errorf("details.field %v, want Idempotency-Key: %s", d["field"], r)
		}
	}
	if b := balance(t, c); b != 19 {
		t.Errorf("balance %d after conflicts, want 19", b)
	}

	// Another key is another request.
	r := c.post("/v1/validate", body, "Idempotency-Key", "contract-validate-2").want(t, 200)
	if r.header.Get("Idempotent-Replay") != "" || bytes.Equal(r.body, first.body) {
		t.Errorf("another key was replayed: %s", r)
	}

	// Length: 8 to 128 characters.
	for _, n := range []int{7, 129, 1000} {
		c.post("/v1/validate", body, "Idempotency-Key", strings.Repeat("k", n)).wantError(t, 400, "BAD_REQUEST")
	}
	for _, n := range []int{8, 128} {
		c.post("/v1/validate", body, "Idempotency-Key", strings.Repeat(string(rune('a'+n%26)), n)).want(t, 200)
	}
	if b := balance(t, c); b != 16 {
		t.Errorf("balance %d, want 16", b)
	}
}

// TestSpec7_3IdempotencyBatch checks Idempotency-Key on POST /v1/batch.
//
// §7 rule 3: "Idempotency (POST /v1/validate and POST /v1/batch)". §4.2:
// "202: batch accepted (2.7). Header Idempotent-Replay: true on
// replays."
//
// Decision: a replay is the same 202 (one job, charged once); the same
// key with another body is 409 CONFLICT naming Idempotency-Key.
func TestSpec7_3IdempotencyBatch(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 20)
	key := a.mint(t)
	c := newClient(t, key)
	body := batchBody([]string{"ann@shop.test", "x@gone.test", "zed@shop.test"})
	first := c.post("/v1/batch", body, "Idempotency-Key", "contract-batch-0001").want(t, 202)
	if h := first.header.Get("Idempotent-Replay"); h != "" {
		t.Errorf("the first answer has Idempotent-Replay %q", h)
	}
	id := first.obj(t)["job_id"].(string)
	again := c.post("/v1/batch", body, "Idempotency-Key", "contract-batch-0001")
	if again.status != 202 || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replay") != "true" {
		t.Errorf("repeat: %s (Idempotent-Replay %q)\nfirst: %s", again, again.header.Get("Idempotent-Replay"), first)
	}
	d := c.post("/v1/batch", batchBody([]string{"ann@shop.test"}), "Idempotency-Key", "contract-batch-0001").wantError(t, 409, "CONFLICT")
	if d["field"] != "Idempotency-Key" {
		t.Errorf("details.field %v, want Idempotency-Key", d["field"])
	}
	for _, n := range []int{7, 129} {
		c.post("/v1/batch", body, "Idempotency-Key", strings.Repeat("b", n)).wantError(t, 400, "BAD_REQUEST")
	}
	waitJob(t, key, id)
	// One job: three rows, three credits.
	rows := allResults(t, key, "kind=batch")
	if len(rows) != 3 {
		t.Errorf("%d batch rows, want 3 (one job)", len(rows))
	}
	if b := balance(t, c); b != 17 {
		t.Errorf("balance %d, want 17 (one job of 3)", b)
	}
}
