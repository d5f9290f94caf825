package winowner

import (
	"os"
	"os/user"
	"testing"
)

// The test's own process: its owner is the user the process runs as,
// which os/user reads from the process's own token.
func TestLookupOwnProcess(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	acct, err := Lookup(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	name, err := acct.name()
	if err != nil {
		t.Fatal(err)
	}
	if name != me.Username || acct.SID != me.Uid {
		t.Errorf("own process: %q (%s), want %q (%s)", name, acct.SID, me.Username, me.Uid)
	}
}

// A PID that names no process is an error, so its owner stays absent.
func TestLookupNoSuchProcess(t *testing.T) {
	// Windows PIDs are multiples of 4: this one is never a process.
	const notAPID = 4*1_000_000 + 3
	if acct, err := Lookup(notAPID); err == nil {
		t.Errorf("PID %d: got %+v, want an error", notAPID, acct)
	}
}
