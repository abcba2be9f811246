package contract

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// checkLimit checks a fixed-window limit: from a fresh sender (a client
// with a source address no other request used, and a fresh key where the
// limit is per key) the first limit requests pass the limiter and the
// next is 429 RATE_LIMITED with Retry-After.
//
// A window is fixed and one minute long; its start is not specified.
// When requests happen to straddle the end of a window the count starts
// again, so a second attempt with a fresh sender is made before failing:
// a limiter that lets more or fewer requests through fails both.
//
// §8: "Exceeding one returns 429 RATE_LIMITED with Retry-After." §7:
// RATE_LIMITED "response has header Retry-After (integer seconds)",
// details "retryAfter (integer seconds)".
func checkLimit(t *testing.T, limit int, newSender func() func() *reply) {
	t.Helper()
	var problem string
	for attempt := 1; attempt <= 2; attempt++ {
		send := newSender()
		start := time.Now()
		problem = ""
		for i := 1; i <= limit; i++ {
			if r := send(); r.status == 429 {
				problem = fmt.Sprintf("request %d of %d was refused: %s", i, limit, r)
				break
			} else if r.status >= 500 {
				t.Fatalf("request %d: %s", i, r)
			}
		}
		if problem == "" {
			r := send()
			if r.status == 429 {
				if err := r.envelopeErr(429, "RATE_LIMITED"); err != nil {
					t.Fatalf("%v: %s", err, r)
				}
				h := r.header.Get("Retry-After")
				ra, err := strconv.Atoi(h)
				if err != nil || ra < 1 || ra > 60 {
					t.Errorf("Retry-After %q is not an integer number of seconds within the one-minute window", h)
				}
				d := obj(r.obj(t)["error"].(map[string]any)["details"])
				if n, ok := asInt(d["retryAfter"]); !ok || n != int64(ra) {
					t.Errorf("details.retryAfter %v, want the Retry-After %q: %s", d["retryAfter"], h, r)
				}
				return
			}
			problem = fmt.Sprintf("request %d was not refused: %s", limit+1, r)
		}
		t.Logf("attempt %d (%v): %s", attempt, time.Since(start).Round(time.Millisecond), problem)
	}
	t.Error(problem)
}

// TestSpec8RateLimitBatch checks POST /v1/batch's limit. The account has
// no credits, so each request is refused for credits and no job runs.
//
// §8: "Fixed windows of one minute, keyed by source IP." "POST /v1/batch
// 30 per minute".
//
// Decision: requests refused with 400 count toward the limit.
func TestSpec8RateLimitBatch(t *testing.T) {
	t.Parallel()
	key := newAccount(t, "enterprise", 0).mint(t)
	var last *client
	checkLimit(t, 30, func() func() *reply {
		c := newClient(t, key)
		last = c
		return func() *reply { return c.post("/v1/batch", `{"emails":["x@gone.test"]}`) }
	})
	// Another endpoint's limit is its own, from the same source address.
	last.get("/v1/balance").want(t, 200)
	last.post("/v1/validate", `{"email":"x@gone.test"}`).wantError(t, 400, "BAD_REQUEST")
}

// TestSpec8RateLimitResults checks GET /v1/results's limit.
//
// §8: "GET /v1/results 120 per minute".
func TestSpec8RateLimitResults(t *testing.T) {
	t.Parallel()
	key := newAccount(t, "enterprise", 0).mint(t)
	checkLimit(t, 120, func() func() *reply {
		c := newClient(t, key)
		return func() *reply { return c.get("/v1/results?limit=1") }
	})
}

// TestSpec8RateLimitOther checks the limit of the other endpoints, on GET
// /v1/balance and GET /v1/jobs/{id} in turn.
//
// §8: "all other endpoints 300 per minute, global".
//
// Decision: "global" is one window for all the other endpoints together.
func TestSpec8RateLimitOther(t *testing.T) {
	t.Parallel()
	key := newAccount(t, "enterprise", 1).mint(t)
	job := completedJob(t, key)
	checkLimit(t, 300, func() func() *reply {
		c := newClient(t, key)
		i := 0
		return func() *reply {
			i++
			if i%2 == 0 {
				return c.get("/v1/jobs/" + job)
			}
			return c.get("/v1/balance")
		}
	})
}

// TestSpec8RateLimitValidate checks POST /v1/validate's limit with
// requests refused before the engine (an empty body), which cost
// nothing.
//
// §8: "POST /v1/validate 500 per minute".
//
// Decision: requests refused with 400 count toward the limit.
func TestSpec8RateLimitValidate(t *testing.T) {
	t.Parallel()
	key := newAccount(t, "enterprise", 0).mint(t)
	checkLimit(t, 500, func() func() *reply {
		c := newClient(t, key)
		return func() *reply { return c.post("/v1/validate", `{}`) }
	})
}

// TestSpec8PerPlanFree checks the Free plan's per-key rates. Each
// attempt uses a fresh key (and source address). Validations use a
// domain that does not exist (fast); batches come from an account
// without credits, so no job runs.
//
// §8 Per-plan request rates: "requests per second per API key" ...
// "Exceeding either returns 429." Free: "/v1/validate 10 per minute",
// "/v1/batch 3 per minute", "other 60 per minute".
//
// Decision: the per-plan rates are counted per key, in fixed one-minute
// windows.
func TestSpec8PerPlanFree(t *testing.T) {
	t.Parallel()
	t.Run("validate 10 per minute", func(t *testing.T) {
		t.Parallel()
		a := newAccount(t, "free", 40)
		checkLimit(t, 10, func() func() *reply {
			c := newClient(t, a.mint(t))
			i := 0
			return func() *reply {
				i++
				return c.post("/v1/validate", fmt.Sprintf(`{"email":"free%d@gone.test"}`, i))
			}
		})
	})
	t.Run("batch 3 per minute", func(t *testing.T) {
		t.Parallel()
		a := newAccount(t, "free", 0)
		checkLimit(t, 3, func() func() *reply {
			c := newClient(t, a.mint(t))
			return func() *reply { return c.post("/v1/batch", `{"emails":["x@gone.test"]}`) }
		})
	})
	t.Run("other 60 per minute", func(t *testing.T) {
		t.Parallel()
		a := newAccount(t, "free", 0)
		checkLimit(t, 60, func() func() *reply {
			c := newClient(t, a.mint(t))
			return func() *reply { return c.get("/v1/balance") }
		})
	})
}

// TestSpec8BatchBodyLimit checks the 8 MB limit of POST /v1/batch's body,
// with an account without credits: a body the service reads is refused
// for credits (details.needed), one it does not read for its size.
//
// §4.2: "Maximum request body: 8 MB." §8: "batch request body 8 MB".
//
// Decision: a body over the limit is 400 BAD_REQUEST with
// details.maxBodyBytes. Whether "8 MB" is 8,000,000 or 8,388,608 bytes is
// left open: the suite sends 7,800,000 bytes (under either) and
// 8,500,000 (over either).
func TestSpec8BatchBodyLimit(t *testing.T) {
	t.Parallel()
	key := newAccount(t, "enterprise", 0).mint(t)
	// Each item is "u" + 6 digits + pad + "@gone.test", quoted, with a
	// comma: 20 + pad bytes.
	under := batchBody(manyAddresses(100000, 58))
	over := batchBody(manyAddresses(100000, 65))
	if len(under) >= 8000000 || len(over) <= 8<<20 {
		t.Fatalf("test bug: %d and %d bytes", len(under), len(over))
	}
	d := newClient(t, key).post("/v1/batch", under).wantError(t, 400, "BAD_REQUEST")
	if n, ok := asInt(d["needed"]); !ok || n != 100000 {
		t.Errorf("a body of %d bytes: details %s, want the credit refusal with needed 100000", len(under), show(d))
	}
	d = newClient(t, key).post("/v1/batch", over).wantError(t, 400, "BAD_REQUEST")
	if d["needed"] != nil {
		t.Errorf("a body of %d bytes was read: %s", len(over), show(d))
	}
	if n, ok := asInt(d["maxBodyBytes"]); !ok || n < 8000000 || n > 8<<20 {
		t.Errorf("a body of %d bytes: details.maxBodyBytes %v, want the 8 MB limit", len(over), d["maxBodyBytes"])
	}
}
