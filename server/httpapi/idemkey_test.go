package httpapi

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestIdemKey: one Idempotency-Key line of 8 to 128 characters is the
// key; none is no key; an empty one, or two lines, answer 400.
func TestIdemKey(t *testing.T) {
	var h fasthttp.RequestHeader
	if k, err := IdemKey(&h); k != nil || err != nil {
		t.Errorf("no header: %q %v", k, err)
	}
	h.Set("Idempotency-Key", "")
	if _, err := IdemKey(&h); err == nil {
		t.Error("an empty key was accepted")
	}
	h.Set("Idempotency-Key", "order-0001")
	if k, err := IdemKey(&h); string(k) != "order-0001" || err != nil {
		t.Errorf("one key: %q %v", k, err)
	}
	h.Add("Idempotency-Key", "order-0001")
	if _, err := IdemKey(&h); err == nil || err.Code != CodeBadRequest {
		t.Errorf("two keys: %v", err)
	}
}
