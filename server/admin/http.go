package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/storage"
)

// HandlerFunc is an admin route. It returns the value to answer with as
// JSON (status 200 unless it set another; []byte and json.RawMessage are
// written as they are) or an error, which WriteError answers.
type HandlerFunc func(ctx *fasthttp.RequestCtx) (any, error)

// JSON adapts h to fasthttp.
func JSON(h HandlerFunc) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		v, err := h(ctx)
		if err != nil {
			WriteError(ctx, err)
			return
		}
		WriteJSON(ctx, v)
	}
}

// WriteJSON answers with v as JSON, keeping a status the handler set.
func WriteJSON(ctx *fasthttp.RequestCtx, v any) {
	var b []byte
	switch v := v.(type) {
	case []byte:
		b = v
	case json.RawMessage:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			WriteError(ctx, fmt.Errorf("cannot encode the answer: %w", err))
			return
		}
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

// statusOf maps the envelope's codes to HTTP statuses (spec §7).
var statusOf = map[string]int{
	adminapi.CodeBadRequest: fasthttp.StatusBadRequest,
	adminapi.CodeNotFound:   fasthttp.StatusNotFound,
	adminapi.CodeConflict:   fasthttp.StatusConflict,
	adminapi.CodeInternal:   fasthttp.StatusInternalServerError,
}

// errKey is the user value under which WriteError leaves an internal
// error for the access log.
type errKey struct{}

// WriteError answers with the error envelope. An *adminapi.Error answers
// as itself; storage's sentinels map to their codes (ErrNotFound 404,
// ErrInvalid 400, ErrExists 409); anything else is INTERNAL and is logged.
func WriteError(ctx *fasthttp.RequestCtx, err error) {
	e := apiError(err)
	status, ok := statusOf[e.Code]
	if !ok {
		e = &adminapi.Error{Code: adminapi.CodeInternal, Message: e.Message}
		status = fasthttp.StatusInternalServerError
	}
	if status == fasthttp.StatusInternalServerError {
		ctx.SetUserValue(errKey{}, err)
	}
	b, jerr := json.Marshal(adminapi.Envelope{Error: e})
	if jerr != nil {
		b = []byte(`{"error":{"code":"INTERNAL","message":"internal error"}}`)
		status = fasthttp.StatusInternalServerError
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.SetStatusCode(status)
	ctx.SetBody(append(b, '\n'))
}

func apiError(err error) *adminapi.Error {
	var e *adminapi.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, storage.ErrNotFound):
		return &adminapi.Error{Code: adminapi.CodeNotFound, Message: trimStorage(err, storage.ErrNotFound)}
	case errors.Is(err, storage.ErrInvalid):
		return &adminapi.Error{Code: adminapi.CodeBadRequest, Message: trimStorage(err, storage.ErrInvalid)}
	case errors.Is(err, storage.ErrExists):
		return &adminapi.Error{Code: adminapi.CodeConflict, Message: trimStorage(err, storage.ErrExists)}
	}
	return &adminapi.Error{Code: adminapi.CodeInternal, Message: "internal error: " + err.Error()}
}

// trimStorage drops the "storage: invalid argument: " of a wrapped
// sentinel, which tells the operator nothing.
func trimStorage(err, sentinel error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, sentinel.Error()+": "); ok {
		return rest
	}
	return msg
}

// badRequest is a 400 with the issues in details.issues.
func badRequest(msg string, issues ...adminapi.Issue) *adminapi.Error {
	e := &adminapi.Error{Code: adminapi.CodeBadRequest, Message: msg}
	if len(issues) > 0 {
		e.Details = map[string]any{"issues": issues}
	}
	return e
}

func notFound(format string, args ...any) *adminapi.Error {
	return &adminapi.Error{Code: adminapi.CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// issues collects the problems of one request.
type issues []adminapi.Issue

func (is *issues) add(path, format string, args ...any) {
	*is = append(*is, adminapi.Issue{Path: path, Message: fmt.Sprintf(format, args...)})
}

// err is nil without issues, else a 400 naming them all.
func (is issues) err() error {
	if len(is) == 0 {
		return nil
	}
	msg := "invalid request"
	if len(is) == 1 {
		msg = "invalid request: " + is[0].Path + " " + is[0].Message
	}
	return badRequest(msg, is...)
}

// DecodeJSON reads the request body into v, a pointer to a struct,
// strictly: one JSON object, no member v does not have, nothing after it.
// A failure is a 400 naming the member.
func DecodeJSON(ctx *fasthttp.RequestCtx, v any) error {
	body := bytes.TrimSpace(ctx.PostBody())
	if len(body) == 0 || body[0] != '{' {
		return badRequest("the body must be a JSON object", adminapi.Issue{Message: "the body must be a JSON object"})
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("the body must be one JSON object", adminapi.Issue{Message: "data after the JSON object"})
	}
	return nil
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		msg := fmt.Sprintf("must be %s, not %s", kindName(typeErr.Type), typeErr.Value)
		return badRequest("invalid request: "+typeErr.Field+" "+msg, adminapi.Issue{Path: typeErr.Field, Message: msg})
	case errors.As(err, &syntaxErr):
		msg := fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
		return badRequest(msg, adminapi.Issue{Message: msg})
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON: truncated", adminapi.Issue{Message: "truncated"})
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return badRequest("invalid request: unknown property "+name, adminapi.Issue{Path: name, Message: "unknown property"})
	}
	return badRequest("invalid body: "+err.Error(), adminapi.Issue{Message: err.Error()})
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return kindName(t.Elem())
	}
	return t.String()
}

// checkText reports whether s is printable text: valid UTF-8 with no
// control characters (a name or a note lands in tables and logs).
func checkText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// ErrorOf is the envelope WriteError would answer err with; an INTERNAL
// one carries err's text, which only the admin socket may show.
func ErrorOf(err error) *adminapi.Error { return apiError(err) }
