package contract

import (
	"strings"
	"testing"
)

// endpoints are the /v1 routes of §4 that need a key, with a request
// body where they take one and the scope §5.3 says each needs.
type endpoint struct {
	method, path, body, scope string
}

func endpoints(jobID string) []endpoint {
	return []endpoint{
		{"POST", "/v1/validate", `{"email":"x@gone.test"}`, "validate:write"},
		{"POST", "/v1/batch", `{"emails":["x@gone.test"]}`, "validate:write"},
		{"GET", "/v1/jobs/" + jobID, "", "validate:read"},
		{"GET", "/v1/jobs/" + jobID + "/results.csv", "", "validate:read"},
		{"GET", "/v1/balance", "", "validate:read"},
		{"GET", "/v1/results", "", "validate:read"},
	}
}

func (e endpoint) send(c *client, hdr ...string) *reply {
	c.t.Helper()
	var body []byte
	if e.body != "" {
		body = []byte(e.body)
	}
	return c.req(e.method, e.path, body, hdr...)
}

// completedJob makes a one-address job of the account and waits for it.
func completedJob(t testing.TB, key string) string {
	t.Helper()
	id := postBatch(t, newClient(t, key), []string{"x@gone.test"})["job_id"].(string)
	waitJob(t, key, id)
	return id
}

// TestSpec5_4NoBearerToken checks requests without a Bearer token.
//
// §5.1: "Every endpoint requires an API key as an HTTP Bearer token:
// header Authorization: Bearer <API_KEY>." §5.4: "When the Authorization
// header has no Bearer token, the response is 401 UNAUTHORIZED."
func TestSpec5_4NoBearerToken(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	key := a.mint(t)
	job := completedJob(t, key)
	c := newClient(t, "")
	for _, e := range endpoints(job) {
		for _, auth := range []string{"", "Basic dXNlcjpwYXNzd29yZA==", "Bearer", "Bearer ", "Token " + key, key, "Bearer" + key} {
			t.Run(e.method+" "+e.path+" "+strings.ReplaceAll(auth, key, "KEY"), func(t *testing.T) {
				var r *reply
				if auth == "" {
					r = e.send(c)
				} else {
					r = e.send(c, "Authorization", auth)
				}
				r.wantError(t, 401, "UNAUTHORIZED")
			})
		}
	}
	// Nothing was charged or created.
	if b := balance(t, newClient(t, key)); b != 9 {
		t.Errorf("balance %d, want 9 (only the one job's address)", b)
	}
}

// TestSpec5_5InvalidKeys checks malformed, unknown and revoked keys.
//
// §5.2: "Key format: svc_live_<prefix>_<secret>." §5.5: "When the key is
// invalid, malformed or revoked, the response is 401 UNAUTHORIZED."
func TestSpec5_5InvalidKeys(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	key := a.mint(t)
	job := completedJob(t, key)
	prefix, secret, ok := strings.Cut(strings.TrimPrefix(key, "svc_live_"), "_")
	if !strings.HasPrefix(key, "svc_live_") || !ok || prefix == "" || secret == "" {
		t.Fatalf("the minted key %q is not of the form svc_live_<prefix>_<secret>", key)
	}
	bad := map[string]string{
		"garbage":           "garbage",
		"prefix only":       "svc_live_",
		"no secret":         "svc_live_" + prefix,
		"no secret after _": "svc_live_" + prefix + "_",
		"another scheme":    "svc_test_" + prefix + "_" + secret,
		"wrong secret":      "svc_live_" + prefix + "_" + strings.Repeat("A", len(secret)),
		"secret cut":        key[:len(key)-1],
		"secret longer":     key + "x",
		"unknown prefix":    "svc_live_" + strings.Repeat("z", len(prefix)) + "_" + secret,
		"secret rotated":    "svc_live_" + prefix + "_" + secret[1:] + secret[:1],
	}
	c := newClient(t, "")
	for name, k := range bad {
		for _, e := range endpoints(job) {
			t.Run(name+" "+e.method+" "+e.path, func(t *testing.T) {
				e.send(c.with(k)).wantError(t, 401, "UNAUTHORIZED")
			})
		}
	}
	// Revoked: the key worked, then does not.
	doomed := a.mint(t)
	dc := newClient(t, doomed)
	dc.get("/v1/balance").want(t, 200)
	ctl(t, "keys", "revoke", doomed)
	for _, e := range endpoints(job) {
		t.Run("revoked "+e.method+" "+e.path, func(t *testing.T) {
			e.send(dc).wantError(t, 401, "UNAUTHORIZED")
		})
	}
	// The other key of the account still works.
	newClient(t, key).get("/v1/balance").want(t, 200)
}

// TestSpec5_6Scopes checks that each endpoint needs its scope.
//
// §5.3: validate:read grants "GET /v1/jobs/{id}, GET
// /v1/jobs/{id}/results.csv, GET /v1/balance, GET /v1/results";
// validate:write grants "POST /v1/validate, POST /v1/batch". §5.6: "When
// the key lacks the scope the endpoint needs, the response is 403
// FORBIDDEN with details.missingScope naming the scope."
func TestSpec5_6Scopes(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	both := a.mint(t)
	job := completedJob(t, both)
	read := newClient(t, a.mint(t, "validate:read"))
	write := newClient(t, a.mint(t, "validate:write"))
	for _, e := range endpoints(job) {
		t.Run(e.method+" "+e.path, func(t *testing.T) {
			lacking, having := read, write
			if e.scope == "validate:read" {
				lacking, having = write, read
			}
			d := e.send(lacking).wantError(t, 403, "FORBIDDEN")
			if d["missingScope"] != e.scope {
				t.Errorf("details.missingScope %v, want %s", d["missingScope"], e.scope)
			}
			if r := e.send(having); r.status >= 300 {
				t.Errorf("a key with %s: %s", e.scope, r)
			}
		})
	}
}

// TestSpec5_7JobsOfAnotherAccount checks that a job is its account's.
//
// §5.7: "A job is visible only to the account that owns it; other
// accounts get 404." §4.3 and §4.4: "404 when the job does not exist or
// belongs to another account."
func TestSpec5_7JobsOfAnotherAccount(t *testing.T) {
	t.Parallel()
	owner := newAccount(t, "enterprise", 10)
	ownerKey := owner.mint(t)
	job := completedJob(t, ownerKey)
	other := newClient(t, newAccount(t, "enterprise", 10).mint(t))
	for _, p := range []string{"/v1/jobs/" + job, "/v1/jobs/" + job + "/results.csv"} {
		other.get(p).wantError(t, 404, "NOT_FOUND")
		newClient(t, ownerKey).get(p).want(t, 200)
	}
	// The other account's history does not show the job's rows either.
	rows, _ := resultsPage(t, other, "")
	if len(rows) != 0 {
		t.Errorf("another account's history shows %s", show(rows))
	}
}
