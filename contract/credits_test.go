package contract

import (
	"strconv"
	"strings"
	"testing"
)

// TestSpec2_10Balance checks GET /v1/balance.
//
// §2.10: "{credits: number}." §4.5: "Scope: validate:read. No parameters.
// 200: balance (2.10)."
func TestSpec2_10Balance(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 42)
	c := newClient(t, a.mint(t, "validate:read"))
	r := c.get("/v1/balance").want(t, 200)
	m := r.obj(t)
	if n, ok := asInt(m["credits"]); !ok || n != 42 {
		t.Errorf("credits %v, want 42 (the account's opening balance): %s", m["credits"], r)
	}
	if mt := mediaType(r.header.Get("Content-Type")); mt != "application/json" {
		t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
	}
	ctl(t, "credits", "set", a.id, "7")
	if b := balance(t, c); b != 7 {
		t.Errorf("credits %d after the operator set 7", b)
	}
}

// TestSpec1_4SingleCostsOneCredit checks the price of a single validation,
// whatever its verdict.
//
// §1.4: "A single validation costs 1 credit. It is charged after the
// validation engine returns a result." §2.4 credits_remaining: "balance
// after this validation". §4.1: "Cost: 1 credit after the engine
// returns."
//
// Decision: the balance before minus the balance after is exactly 1, and
// credits_remaining is the balance GET /v1/balance then shows.
func TestSpec1_4SingleCostsOneCredit(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 25)
	c := newClient(t, a.mint(t))
	for _, e := range []string{"ann@shop.test", "zed@shop.test", "x@gone.test", "x@mailinator.com", "x@refused.test", "bad address@shop.test"} {
		before := balance(t, c)
		r, m := validate(t, c, e)
		after := balance(t, c)
		if before-after != 1 {
			t.Errorf("%s (%v) cost %d credits, want 1", e, m["status"], before-after)
		}
		if n, _ := asInt(m["credits_remaining"]); n != after {
			t.Errorf("%s: credits_remaining %v, balance %d", e, m["credits_remaining"], after)
		}
		if h := r.header.Get("X-Credits-Remaining"); h != strconv.FormatInt(after, 10) {
			t.Errorf("%s: X-Credits-Remaining %q, balance %d", e, h, after)
		}
	}
}

// TestSpec2_1CacheCostsOneAndIsRecorded checks cache: true.
//
// §2.1 cache: "When true, the account's own recent probe of the same
// address is reused instead of probing again. The call still costs 1
// credit and is still recorded in history. When false or absent, a fresh
// probe is performed." §2.4 cached: "true when served from the account's
// recent cache". §2.9 cached_from: "source result when the row was served
// from cache".
//
// Decision: §2.9 types cached_from "string (UUID) or null", while a
// row's id is a "numeric identifier serialized as a string", so
// cached_from cannot be the source row's id. The suite demands §2.9's
// type on a row served from cache, null on the others, and one value for
// validations served from one source probe. verifyd adds to every row a
// result_id (a UUID: the stored result the row shows), and a cached row's
// cached_from is its source row's result_id, so a client can follow it.
func TestSpec2_1CacheCostsOneAndIsRecorded(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	key := a.mint(t)
	c := newClient(t, key)
	_, fresh := validate(t, c, "ann@shop.test")
	if fresh["cached"] != false {
		t.Errorf("a fresh probe has cached %v", fresh["cached"])
	}
	r := c.post("/v1/validate", `{"email":"ann@shop.test","cache":true}`).want(t, 200)
	m := r.obj(t)
	if m["cached"] != true {
		t.Errorf("cache:true with a recent probe: cached %v, want true: %s", m["cached"], r)
	}
	if m["status"] != fresh["status"] {
		t.Errorf("cached status %v, source %v", m["status"], fresh["status"])
	}
	if p := receiptProblems(m); len(p) > 0 {
		t.Error(p)
	}
	if err := verifyReceipt(t, c, r.body); err != nil {
		t.Error(err)
	}
	if b := balance(t, c); b != 8 {
		t.Errorf("balance %d after a fresh and a cached validation from 10, want 8", b)
	}
	if n, _ := asInt(m["credits_remaining"]); n != 8 {
		t.Errorf("credits_remaining %v, want 8", m["credits_remaining"])
	}
	// A second validation served from the same source.
	c.post("/v1/validate", `{"email":"ann@shop.test","cache":true}`).want(t, 200)
	rows, _ := resultsPage(t, c, "limit=3")
	if len(rows) != 3 {
		t.Fatalf("%d history rows after three validations, want 3", len(rows))
	}
	for _, row := range rows[:2] {
		if row["kind"] != "single" || row["email"] != "ann@shop.test" || !hasKind(row["cached_from"], kUUID) {
			t.Errorf("a cached validation's row %s: want kind single and a UUID cached_from", show(row))
		}
	}
	if rows[0]["cached_from"] != rows[1]["cached_from"] {
		t.Errorf("two validations served from one source have cached_from %v and %v", rows[0]["cached_from"], rows[1]["cached_from"])
	}
	if rows[2]["cached_from"] != nil {
		t.Errorf("the fresh row has cached_from %v", rows[2]["cached_from"])
	}
	if !hasKind(rows[2]["result_id"], kUUID) || rows[0]["cached_from"] != rows[2]["result_id"] ||
		rows[0]["result_id"] == rows[2]["result_id"] || rows[0]["result_id"] == rows[1]["result_id"] {
		t.Errorf("result_id: the source row's %v, the cached rows' %v and %v (cached_from %v): want three UUIDs, cached_from the source's",
			rows[2]["result_id"], rows[0]["result_id"], rows[1]["result_id"], rows[0]["cached_from"])
	}
	if b := balance(t, c); b != 7 {
		t.Errorf("balance %d after three validations from 10, want 7", b)
	}

	// cache false (or absent): a fresh probe.
	for _, body := range []string{`{"email":"ann@shop.test","cache":false}`, `{"email":"ann@shop.test"}`} {
		m := c.post("/v1/validate", body).want(t, 200).obj(t)
		if m["cached"] != false {
			t.Errorf("%s: cached %v, want false", body, m["cached"])
		}
	}
}

// TestSpec1_4InsufficientCreditsSingle checks a validation without
// credit.
//
// §1.4: "A request that would exceed the balance is rejected with 400
// BAD_REQUEST." §4.1: "insufficient credits (details.currentCredits)".
// §7 rule 2: "for insufficient single-validation credits the text states
// credits needed and held". §8: "A single validation needs at least 1
// credit."
func TestSpec1_4InsufficientCreditsSingle(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 1)
	c := newClient(t, a.mint(t))
	validate(t, c, "x@gone.test")
	r := c.post("/v1/validate", `{"email":"ann@shop.test"}`)
	d := r.wantError(t, 400, "BAD_REQUEST")
	if n, ok := asInt(d["currentCredits"]); !ok || n != 0 {
		t.Errorf("details.currentCredits %v, want 0: %s", d["currentCredits"], r)
	}
	// "states credits needed and held": 1 needed, 0 held.
	msg := r.obj(t)["error"].(map[string]any)["message"].(string)
	if !strings.Contains(strings.ToLower(msg), "credit") || !strings.Contains(msg, "1") || !strings.Contains(msg, "0") {
		t.Errorf("message %q does not state the credits needed (1) and held (0)", msg)
	}
	if b := balance(t, c); b != 0 {
		t.Errorf("balance %d after a refused validation", b)
	}
	rows, _ := resultsPage(t, c, "")
	if len(rows) != 1 {
		t.Errorf("%d history rows: the refused validation was recorded", len(rows))
	}
}

// TestSpec4_2InsufficientCreditsBatch checks a batch the balance cannot
// cover.
//
// §4.2: "for insufficient credits details holds currentCredits, needed
// and deltaShortfall." §8: "A batch needs at least N credits (unique
// lower-cased addresses). Otherwise 400 BAD_REQUEST".
//
// Decision: deltaShortfall = needed - currentCredits; nothing is charged
// and no job is created.
func TestSpec4_2InsufficientCreditsBatch(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 5)
	c := newClient(t, a.mint(t))
	emails := []string{"a@gone.test", "b@gone.test", "c@gone.test", "d@gone.test", "e@gone.test", "f@gone.test", "g@gone.test", "h@gone.test",
		"A@gone.test", "B@Gone.test"} // 8 unique lower-cased addresses
	d := c.post("/v1/batch", batchBody(emails)).wantError(t, 400, "BAD_REQUEST")
	cur, ok1 := asInt(d["currentCredits"])
	needed, ok2 := asInt(d["needed"])
	short, ok3 := asInt(d["deltaShortfall"])
	if !ok1 || !ok2 || !ok3 || cur != 5 || needed != 8 || short != 3 {
		t.Errorf("details %s, want currentCredits 5, needed 8, deltaShortfall 3", show(d))
	}
	if b := balance(t, c); b != 5 {
		t.Errorf("balance %d after a refused batch, want 5", b)
	}
	// Exactly enough is enough.
	acc := postBatch(t, c, emails[:5])
	waitJob(t, c.key, acc["job_id"].(string))
	if b := balance(t, c); b != 0 {
		t.Errorf("balance %d after a batch of 5 with 5 credits", b)
	}
}

// TestSpec3BatchCreditsSettle checks what a completed batch costs.
//
// §1.4: "A batch reserves N credits at enqueue, where N is the count of
// unique lower-cased addresses. The unused part is refunded when the job
// ends." §3: "unused reserved credits refunded".
//
// Decision: each processed address uses 1 credit: once the job has
// completed, the balance is the opening balance minus processed.
func TestSpec3BatchCreditsSettle(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 20)
	c := newClient(t, a.mint(t))
	acc := postBatch(t, c, []string{"ann@shop.test", "Ann@shop.test", "zed@shop.test", "x@refused.test", "y@gone.test", "Y@GONE.TEST"})
	if n, _ := asInt(acc["credits_reserved"]); n != 4 {
		t.Errorf("credits_reserved %v, want 4", acc["credits_reserved"])
	}
	j := waitJob(t, c.key, acc["job_id"].(string))
	processed, _ := asInt(obj(j["progress"])["processed"])
	if processed != 4 {
		t.Errorf("processed %d, want 4", processed)
	}
	if b := balance(t, c); b != 20-processed {
		t.Errorf("balance %d after the job, want 20 - %d", b, processed)
	}
}
