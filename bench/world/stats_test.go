package world

import (
	"context"
	"reflect"
	"testing"
)

func TestStatsServer(t *testing.T) {
	l := NewSessionLog()
	l.Add(Session{ID: l.newID(), Client: "127.0.0.34", Outcome: OutcomeOK, Rcpts: make([]RcptResult, 3)})
	l.Add(Session{ID: l.newID(), Client: "127.0.0.34", Outcome: OutcomeBlocked, RefusedClient: true})
	l.Add(Session{ID: l.newID(), Client: "127.0.0.50", Outcome: OutcomeOK, Rcpts: make([]RcptResult, 1)})
	s, err := StartStats(l, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := FetchStats(context.Background(), s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if want := l.Stats(); !reflect.DeepEqual(got, want) {
		t.Errorf("fetched %+v, want %+v", got, want)
	}
	if got.ClientRcpts["127.0.0.34"] != 3 || got.ClientRefused["127.0.0.34"] != 1 || got.Clients["127.0.0.50"] != 1 {
		t.Errorf("stats %+v", got)
	}
	if _, err := StartStats(l, "0.0.0.0:0"); err == nil {
		t.Error("listened on a non-loopback address")
	}
}
