package winowner

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func TestAccountName(t *testing.T) {
	for _, c := range []struct {
		acct Account
		want string
		ok   bool
	}{
		{Account{Domain: "LAB", User: "alice"}, `LAB\alice`, true},
		{Account{Domain: "NT AUTHORITY", User: "SYSTEM"}, `NT AUTHORITY\SYSTEM`, true},
		{Account{User: "bob"}, "bob", true},
		{Account{Domain: "LAB"}, "", false},
		{Account{}, "", false},
	} {
		got, err := c.acct.name()
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("%+v: got %q, %v; want %q, ok %v", c.acct, got, err, c.want, c.ok)
		}
	}
}

// A process that cannot be opened keeps an absent owner, an owner already
// known is kept, and the others get DOMAIN\user and the SID.
func TestEnrichLeavesUnknownOwnersAbsent(t *testing.T) {
	accounts := map[uint32]Account{
		10: {Domain: "LAB", User: "alice", SID: "S-1-5-21-1-2-3-1001"},
		12: {Domain: "LAB", SID: "S-1-5-21-1-2-3-1002"}, // no name: absent, not the SID
	}
	var asked []uint32
	e := Enricher{Lookup: func(pid uint32) (Account, error) {
		asked = append(asked, pid)
		a, ok := accounts[pid]
		if !ok {
			return Account{}, errors.New("access denied")
		}
		return a, nil
	}}
	s := &snapshot.Snapshot{Processes: []snapshot.Process{
		{PID: 10}, {PID: 11}, {PID: 12}, {PID: 13, Owner: snapshot.Owner{User: "known"}},
	}}
	e.Enrich(context.Background(), s)
	want := []snapshot.Owner{{User: `LAB\alice`, UID: "S-1-5-21-1-2-3-1001"}, {}, {}, {User: "known"}}
	for i, p := range s.Processes {
		if p.Owner != want[i] {
			t.Errorf("PID %d: owner %+v, want %+v", p.PID, p.Owner, want[i])
		}
	}
	if len(asked) != 3 {
		t.Errorf("looked up %v, want the three PIDs without an owner", asked)
	}
}

func TestEnrichStopsAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := Enricher{Lookup: func(uint32) (Account, error) {
		t.Error("looked up after the context ended")
		return Account{User: "x"}, nil
	}}
	s := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: 1}}}
	e.Enrich(ctx, s)
	if s.Processes[0].Owner != (snapshot.Owner{}) {
		t.Errorf("owner %+v after the deadline, want absent", s.Processes[0].Owner)
	}
}
