package contract

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSpec1_5EveryErrorIsTheEnvelope sends requests that fail in many
// ways and checks each answer is the error envelope with its code's
// status.
//
// §1.5: "Every non-2xx response uses the error envelope of part 7." §7:
// "Every non-2xx response has the envelope {error: {code, message,
// details?}}." §2.11: "code: string from the error code enumeration".
//
// Decision: unknown paths are 404 NOT_FOUND; a known path with another
// method is 400 BAD_REQUEST; malformed JSON is 400; a body over the
// route's limit is 400 with details.maxBodyBytes; every non-2xx on /v1 is
// one of §7's seven statuses with its code, Content-Type
// application/json.
func TestSpec1_5EveryErrorIsTheEnvelope(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	key := a.mint(t)
	c := newClient(t, key)
	big := `{"email":"` + strings.Repeat("a", 9<<20) + `@gone.test"}`
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		key          string
		status       int
		detail       string   // a member details must have
		header       []string // more request header fields, name and value
	}{
		{"unknown path", "GET", "/v1/nothing", "", key, 404, "", nil},
		{"unknown path outside /v1", "GET", "/nope", "", key, 404, "", nil},
		{"unknown path with a body", "POST", "/v1/validates", `{"email":"x@gone.test"}`, key, 404, "", nil},
		{"trailing slash", "GET", "/v1/balance/", "", key, 404, "", nil},
		{"job subpath", "GET", "/v1/jobs/6f1c2a7e-3b0d-4c55-9a1e-0c8b2f4d7e91/other", "", key, 404, "", nil},
		{"GET /v1/validate", "GET", "/v1/validate", "", key, 400, "", nil},
		{"DELETE /v1/validate", "DELETE", "/v1/validate", "", key, 400, "", nil},
		{"PUT /v1/batch", "PUT", "/v1/batch", `{"emails":["x@gone.test"]}`, key, 400, "", nil},
		{"POST /v1/balance", "POST", "/v1/balance", `{}`, key, 400, "", nil},
		{"DELETE /v1/results", "DELETE", "/v1/results", "", key, 400, "", nil},
		{"PATCH /v1/jobs/{id}", "PATCH", "/v1/jobs/6f1c2a7e-3b0d-4c55-9a1e-0c8b2f4d7e91", `{}`, key, 400, "", nil},
		{"malformed JSON", "POST", "/v1/validate", `{"email":`, key, 400, "issues", nil},
		{"trailing data", "POST", "/v1/validate", `{"email":"x@gone.test"} {}`, key, 400, "issues", nil},
		{"validate body over the limit", "POST", "/v1/validate", big, key, 400, "maxBodyBytes", nil},
		// Decision: a request head larger than the server takes (HTTP's
		// 431) is a BAD_REQUEST, so a 400.
		{"request head of 64 KiB", "GET", "/v1/balance", "", key, 400, "", []string{"X-Padding", strings.Repeat("p", 64<<10)}},
		{"no key", "GET", "/v1/balance", "", "", 401, "", nil},
		{"bad key", "GET", "/v1/balance", "", "svc_live_nope", 401, "", nil},
		{"no such job", "GET", "/v1/jobs/6f1c2a7e-3b0d-4c55-9a1e-0c8b2f4d7e91", "", key, 404, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := c.with(tc.key).req(tc.method, tc.path, body, tc.header...)
			code := ""
			for k, s := range statusOf {
				if s == tc.status {
					code = k
				}
			}
			d := r.wantError(t, tc.status, code)
			if tc.detail != "" {
				if _, ok := d[tc.detail]; !ok {
					t.Errorf("details lack %s: %s", tc.detail, r)
				}
			}
			if tc.detail == "maxBodyBytes" {
				if n, ok := asInt(d["maxBodyBytes"]); !ok || n <= 0 || n >= int64(len(big)) {
					t.Errorf("details.maxBodyBytes %v is not a limit below the %d bytes sent", d["maxBodyBytes"], len(big))
				}
			}
		})
	}
	if b := balance(t, c); b != 10 {
		t.Errorf("balance %d after failed requests, want 10", b)
	}
}

// TestSpec7ErrorCodesHaveTheirStatus provokes each error code the
// contract can provoke and checks it comes with its one status, and that
// no status outside §7's table appears.
//
// §7's table: BAD_REQUEST 400, UNAUTHORIZED 401, FORBIDDEN 403,
// NOT_FOUND 404, CONFLICT 409, RATE_LIMITED 429, INTERNAL 500.
//
// Decision: every BAD_REQUEST is HTTP 400 and each code exactly its §7
// status. (RATE_LIMITED is provoked by the §8 tests, which check its 429;
// INTERNAL cannot be provoked from outside.)
func TestSpec7ErrorCodesHaveTheirStatus(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	key := a.mint(t)
	readOnly := a.mint(t, "validate:read")
	c := newClient(t, key)
	c.post("/v1/validate", `{"email":"x@gone.test"}`, "Idempotency-Key", "conflict-key-1").want(t, 200)
	for _, tc := range []struct {
		name string
		send func() *reply
		code string
	}{
		{"invalid body", func() *reply { return c.post("/v1/validate", `{}`) }, "BAD_REQUEST"},
		{"insufficient credits", func() *reply {
			return c.post("/v1/batch", batchBody(manyAddresses(11, 0)))
		}, "BAD_REQUEST"},
		{"bad Idempotency-Key", func() *reply {
			return c.post("/v1/validate", `{"email":"x@gone.test"}`, "Idempotency-Key", "short")
		}, "BAD_REQUEST"},
		{"no key", func() *reply { return c.with("").get("/v1/balance") }, "UNAUTHORIZED"},
		{"missing scope", func() *reply { return c.with(readOnly).post("/v1/validate", `{"email":"x@gone.test"}`) }, "FORBIDDEN"},
		{"no such job", func() *reply { return c.get("/v1/jobs/6f1c2a7e-3b0d-4c55-9a1e-0c8b2f4d7e91") }, "NOT_FOUND"},
		{"idempotency conflict", func() *reply {
			return c.post("/v1/validate", `{"email":"y@gone.test"}`, "Idempotency-Key", "conflict-key-1")
		}, "CONFLICT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.send()
			if _, ok := statusOf[tc.code]; !ok {
				t.Fatalf("test bug: %s", tc.code)
			}
			if err := envelopeShape(r, ""); err != nil {
				t.Fatalf("%v: %s", err, r)
			}
			got := r.obj(t)["error"].(map[string]any)["code"].(string)
			if got != tc.code {
				t.Errorf("code %s, want %s: %s", got, tc.code, r)
			}
			if r.status != statusOf[got] {
				t.Errorf("code %s came with status %d; §7 gives it %d: %s", got, r.status, statusOf[got], r)
			}
		})
	}
}

// TestSpec1_5RequestBodiesAreJSON checks the request content types.
//
// §1.5: "Format: JSON, UTF-8 for all request and response bodies". §4.1:
// "Body: validation request (2.1), content type application/json."
//
// Decision: a JSON POST with another Content-Type (text/plain, a form,
// multipart, XML, a charset other than UTF-8) is 400 BAD_REQUEST with an
// issue whose path is "Content-Type"; application/json, with or without
// charset=utf-8 in any case, and no Content-Type at all are accepted.
// Nothing refused is charged.
func TestSpec1_5RequestBodiesAreJSON(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	key := a.mint(t)
	c := newClient(t, key)
	// For the batch route, an account without credits: an accepted
	// body is refused for credits (details.needed), so no job runs.
	broke := newClient(t, newAccount(t, "enterprise", 0).mint(t))
	wrong := []string{
		"text/plain",
		"text/plain; charset=utf-8",
		"application/x-www-form-urlencoded",
		"multipart/form-data; boundary=xyz",
		"application/xml",
		"text/json",
		"application/json; charset=latin1",
		"application/json; charset=utf-16",
		"application/json; charset=iso-8859-1",
	}
	for _, ct := range wrong {
		t.Run("refused "+ct, func(t *testing.T) {
			for _, tc := range []struct {
				c    *client
				path string
				body string
			}{
				{c, "/v1/validate", `{"email":"x@gone.test"}`},
				{broke, "/v1/batch", `{"emails":["x@gone.test"]}`},
			} {
				r := tc.c.post(tc.path, tc.body, "Content-Type", ct)
				if err := r.envelopeErr(400, "BAD_REQUEST"); err != nil {
					t.Errorf("%v: %s", err, r)
					continue
				}
				d := obj(r.obj(t)["error"].(map[string]any)["details"])
				if !slices.Contains(issuePaths(d), "Content-Type") {
					t.Errorf("no issue with path Content-Type: %s", r)
				}
			}
		})
	}
	accepted := []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8", "application/json;charset=UTF-8", ""}
	for _, ct := range accepted {
		t.Run(fmt.Sprintf("accepted %q", ct), func(t *testing.T) {
			c.post("/v1/validate", `{"email":"x@gone.test"}`, "Content-Type", ct).want(t, 200)
			d := broke.post("/v1/batch", `{"emails":["x@gone.test"]}`, "Content-Type", ct).wantError(t, 400, "BAD_REQUEST")
			if n, ok := asInt(d["needed"]); !ok || n != 1 {
				t.Errorf("details %s: the body was not read as a batch of 1", show(d))
			}
		})
	}
	if b := balance(t, c); b != 10-int64(len(accepted)) {
		t.Errorf("balance %d, want %d: only the accepted validations are charged", b, 10-len(accepted))
	}
}
