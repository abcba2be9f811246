package storage_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/verifyd/verifyd/storage"
)

// TestContractTakesContext: every method of every interface of the
// contract takes a context.Context first, so that a caller's deadline
// reaches the backend (a request's, PostgreSQL's locks).
func TestContractTakesContext(t *testing.T) {
	ctxType := reflect.TypeFor[context.Context]()
	n := 0
	for _, it := range []reflect.Type{
		reflect.TypeFor[storage.Store](), reflect.TypeFor[storage.JobLeases](),
		reflect.TypeFor[storage.Accounts](), reflect.TypeFor[storage.Keys](), reflect.TypeFor[storage.Balances](),
		reflect.TypeFor[storage.Idempotency](), reflect.TypeFor[storage.Results](), reflect.TypeFor[storage.Jobs](),
		reflect.TypeFor[storage.Outbox](), reflect.TypeFor[storage.Users](), reflect.TypeFor[storage.Secrets](),
	} {
		for i := range it.NumMethod() {
			m := it.Method(i)
			n++
			if m.Type.NumIn() == 0 || m.Type.In(0) != ctxType {
				t.Errorf("%s.%s%s: the first argument is not a context.Context", it.Name(), m.Name, m.Type.String()[4:])
			}
		}
	}
	if n < 70 {
		t.Errorf("%d methods checked: the contract lost its interfaces?", n)
	}
}
