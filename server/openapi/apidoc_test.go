package openapi

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// apiDocPath is the customer-facing API reference, which must agree with
// openapi.json.
const apiDocPath = "../../docs/api.md"

// TestAPIDocMatchesOpenAPI keeps docs/api.md in step with openapi.json:
// the routes it documents exist, the public routes are all documented,
// the fields of their JSON bodies and answers, the error codes and the
// status codes are named (checkAPIDoc).
func TestAPIDocMatchesOpenAPI(t *testing.T) {
	doc, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkAPIDoc(string(doc), JSON) {
		t.Errorf("docs/api.md: %s", p)
	}
}

// TestAPIDocCanFail runs the checker on a small document that lacks
// routes, fields, codes and statuses, and documents a route the spec does
// not have, so that TestAPIDocMatchesOpenAPI cannot pass by checking
// nothing.
func TestAPIDocCanFail(t *testing.T) {
	doc := "# API\n\n" +
		"Errors: `BAD_REQUEST`, `UNAUTHORIZED`.\n\n" +
		"## Endpoints\n\n" +
		"### `POST /v1/validate`\n\n" +
		"Takes `email` and `cache`; answers `status`, `score` and `checks.reason`.\n" +
		"Statuses: 200, 400.\n\n" +
		"### `GET /v1/nothing`\n\n" +
		"Not a route.\n\n" +
		"```\n### `GET /v1/balance`\nin a code block: not a heading\n```\n"
	problems := checkAPIDoc(doc, JSON)
	if len(problems) == 0 {
		t.Fatal("no problems reported for a document that lacks nearly everything")
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{
		"GET /v1/nothing",            // documented, not in the spec
		"GET /v1/balance",            // in the spec, not documented (the code block does not count)
		"GET /healthz",               // likewise
		"POST /auth/login",           // likewise
		"GET /.well-known/jwks.json", // likewise
		"`credits_remaining`",        // a field of the receipt
		"`sig`",                      // likewise
		"`mx_host`",                  // a field of checks, one level down
		"`RATE_LIMITED`",             // an error code
		"status 409",                 // a status of POST /v1/validate
		"status 429",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no problem mentions %s; problems:\n%s", want, all)
		}
	}
	// What the document has is not reported.
	for _, notWant := range []string{"field `email` ", "field `cache` ", "field `status` ", "field `score` ",
		"field `reason` ", "status 200 ", "status 400 ", "error code `BAD_REQUEST` ", "error code `UNAUTHORIZED` "} {
		if strings.Contains(all, notWant) {
			t.Errorf("reported %q, which the document has; problems:\n%s", notWant, all)
		}
	}
}

// routeHeading is a route's section heading in docs/api.md.
var routeHeading = regexp.MustCompile("(?m)^### `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`$")

// codeSpan is an inline code span.
var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// route is one documented route: its method and path, and the text of
// its section.
type route struct {
	method, path string
	section      string
}

func (r route) String() string { return r.method + " " + r.path }

// checkAPIDoc compares the API reference doc with the OpenAPI document
// spec and returns the problems found:
//
//   - a route heading (### `METHOD /path`) that is not an operation of
//     spec;
//   - an operation of spec under /v1/, /auth/ or /.well-known/, or
//     /healthz or /openapi.json, with no heading;
//   - for a documented /v1/ route, a property of its JSON request body or
//     of a 2xx JSON answer (top level, and one level down: the properties
//     of an object or of an array's items) not named in backticks in doc,
//     alone or as a component of a dotted name (`checks.mx_host`);
//   - an error code of the Error schema's code enum not named in
//     backticks;
//   - a status code of a documented route's answers missing from the text
//     of its section (from its heading to the next ### or ## heading;
//     headings with nothing between them share the section that follows
//     the last).
//
// Fenced code blocks are not read: a heading or a name inside one does
// not count.
func checkAPIDoc(doc string, spec []byte) []string {
	var api struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(spec, &api); err != nil {
		return []string{"openapi.json does not parse: " + err.Error()}
	}
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	text := withoutFences(doc)
	routes := docRoutes(text)
	names := backticked(text)

	// Every documented route is an operation of the spec.
	documented := map[string]bool{}
	for _, r := range routes {
		if documented[r.String()] {
			report("route %s has two headings", r)
		}
		documented[r.String()] = true
		if _, ok := operation(api.Paths, r.method, r.path); !ok {
			report("route %s is documented but is not in openapi.json", r)
		}
	}

	// Every public operation of the spec is documented.
	var public []string
	for path, ops := range api.Paths {
		if !publicPath(path) {
			continue
		}
		for method := range ops {
			if isMethod(method) {
				public = append(public, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(public)
	for _, r := range public {
		if !documented[r] {
			report("route %s of openapi.json has no heading ### `%s`", r, r)
		}
	}

	for _, r := range routes {
		raw, ok := operation(api.Paths, r.method, r.path)
		if !ok {
			continue
		}
		var op struct {
			RequestBody struct {
				Content map[string]struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Content map[string]struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		}
		if err := json.Unmarshal(raw, &op); err != nil {
			report("route %s: its operation does not parse: %v", r, err)
			continue
		}

		// Fields of the JSON bodies of /v1/ routes.
		if strings.HasPrefix(r.path, "/v1/") {
			var schemas []json.RawMessage
			for ct, c := range op.RequestBody.Content {
				if jsonType(ct) {
					schemas = append(schemas, c.Schema)
				}
			}
			for status, resp := range op.Responses {
				if !strings.HasPrefix(status, "2") {
					continue
				}
				for ct, c := range resp.Content {
					if jsonType(ct) {
						schemas = append(schemas, c.Schema)
					}
				}
			}
			var fields []string
			for _, s := range schemas {
				fields = append(fields, schemaFields(s, api.Components.Schemas)...)
			}
			sort.Strings(fields)
			for _, f := range slices.Compact(fields) {
				if !names[f] {
					report("route %s: field `%s` of openapi.json is not named in backticks", r, f)
				}
			}
		}

		// Status codes, in the route's own section.
		var statuses []string
		for status := range op.Responses {
			if isStatus(status) {
				statuses = append(statuses, status)
			}
		}
		sort.Strings(statuses)
		for _, status := range statuses {
			if !regexp.MustCompile(`\b` + status + `\b`).MatchString(r.section) {
				report("route %s: status %s of openapi.json is not in its section", r, status)
			}
		}
	}

	// Error codes.
	for _, code := range errorCodes(api.Components.Schemas) {
		if !names[code] {
			report("error code `%s` of openapi.json is not named in backticks", code)
		}
	}
	return problems
}

// withoutFences blanks the lines of fenced code blocks (``` or ~~~),
// fences included, keeping the line count.
func withoutFences(doc string) string {
	lines := strings.Split(doc, "\n")
	fence := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			fence = t[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// sectionEnd matches the heading that ends a route's section.
var sectionEnd = regexp.MustCompile(`(?m)^#{2,3} `)

// docRoutes lists the route headings of text, each with its section.
func docRoutes(text string) []route {
	matches := routeHeading.FindAllStringSubmatchIndex(text, -1)
	var out []route
	var group []int // indexes in out of headings awaiting their section
	for i, m := range matches {
		out = append(out, route{method: text[m[2]:m[3]], path: text[m[4]:m[5]]})
		group = append(group, len(out)-1)
		end := len(text)
		if loc := sectionEnd.FindStringIndex(text[m[1]:]); loc != nil {
			end = m[1] + loc[0]
		}
		section := text[m[1]:end]
		if i+1 < len(matches) && matches[i+1][0] == end && strings.TrimSpace(section) == "" {
			continue // the next heading shares this one's section
		}
		for _, j := range group {
			out[j].section = section
		}
		group = group[:0]
	}
	return out
}

// backticked is every inline code span of text, and each dotted
// component of one (`checks.mx_host` gives checks and mx_host).
func backticked(text string) map[string]bool {
	names := map[string]bool{}
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		s := strings.TrimSpace(m[1])
		names[s] = true
		for _, part := range strings.Split(s, ".") {
			names[part] = true
		}
	}
	return names
}

// operation returns the operation of method on path.
func operation(paths map[string]map[string]json.RawMessage, method, path string) (json.RawMessage, bool) {
	ops, ok := paths[path]
	if !ok {
		return nil, false
	}
	op, ok := ops[strings.ToLower(method)]
	return op, ok
}

// publicPath reports whether a path of the spec must be documented.
func publicPath(p string) bool {
	return strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/auth/") ||
		strings.HasPrefix(p, "/.well-known/") || p == "/healthz" || p == "/openapi.json"
}

func isMethod(m string) bool {
	switch m {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return true
	}
	return false
}

// isStatus reports whether a response key is an HTTP status code (not
// "default" or a range such as "2XX").
func isStatus(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// jsonType reports whether a media type is JSON (application/json or a
// +json type such as application/jwk-set+json).
func jsonType(ct string) bool {
	ct = strings.TrimSpace(strings.ToLower(strings.SplitN(ct, ";", 2)[0]))
	return ct == "application/json" || strings.HasSuffix(ct, "+json")
}

// schemaNode is what the checker reads of a JSON Schema.
type schemaNode struct {
	Ref        string                     `json:"$ref"`
	Properties map[string]json.RawMessage `json:"properties"`
	Items      json.RawMessage            `json:"items"`
	Enum       []json.RawMessage          `json:"enum"`
}

// resolve decodes a schema, following $ref into components/schemas.
func resolve(raw json.RawMessage, schemas map[string]json.RawMessage) schemaNode {
	var n schemaNode
	for range 16 { // a bound on chains of $ref
		if len(raw) == 0 || json.Unmarshal(raw, &n) != nil {
			return schemaNode{}
		}
		name, ok := strings.CutPrefix(n.Ref, "#/components/schemas/")
		if !ok {
			return n
		}
		raw = schemas[name]
		n = schemaNode{}
	}
	return n
}

// objectProps is the properties of a schema: of the object itself, or
// of an array's items.
func objectProps(raw json.RawMessage, schemas map[string]json.RawMessage) map[string]json.RawMessage {
	n := resolve(raw, schemas)
	if len(n.Properties) == 0 && len(n.Items) > 0 {
		n = resolve(n.Items, schemas)
	}
	return n.Properties
}

// schemaFields is the property names of a schema, top level and one level
// down.
func schemaFields(raw json.RawMessage, schemas map[string]json.RawMessage) []string {
	var out []string
	for name, sub := range objectProps(raw, schemas) {
		out = append(out, name)
		for inner := range objectProps(sub, schemas) {
			out = append(out, inner)
		}
	}
	return out
}

// errorCodes is the enum of the Error schema's code property, top level
// or inside its error object; nil when it has none.
func errorCodes(schemas map[string]json.RawMessage) []string {
	raw, ok := schemas["Error"]
	if !ok {
		return nil
	}
	props := objectProps(raw, schemas)
	code, ok := props["code"]
	if !ok {
		if e, ok := props["error"]; ok {
			code = objectProps(e, schemas)["code"]
		}
	}
	var codes []string
	for _, v := range resolve(code, schemas).Enum {
		var s string
		if json.Unmarshal(v, &s) == nil {
			codes = append(codes, s)
		}
	}
	return codes
}
