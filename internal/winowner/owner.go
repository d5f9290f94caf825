// Package winowner fills in the owners of GPU processes on Windows from
// the processes' access tokens: OpenProcess (query-limited access),
// OpenProcessToken, GetTokenInformation(TokenUser) and LookupAccountSid,
// giving DOMAIN\user. A process that cannot be opened (another user's, a
// protected one, one that ended) keeps an absent owner, never a guessed
// one. Elsewhere than Windows nothing is looked up.
package winowner

import (
	"context"
	"errors"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Enricher fills Owner.User (DOMAIN\user) and Owner.UID (the SID) of the
// snapshot's processes whose owner is unknown.
type Enricher struct {
	// Lookup returns the account and SID of a process; nil means the
	// Windows API (Lookup).
	Lookup func(pid uint32) (Account, error)
}

// Account is the owner of a process as the Windows API names it.
type Account struct {
	Domain, User string // LookupAccountSid's names
	SID          string // S-1-5-...
}

// errNoName is an account whose SID has no user name.
var errNoName = errors.New("the account has no name")

// name is the owner as gpuwatch shows it: DOMAIN\user, or the user alone
// where the account has no domain; an error where there is no user name.
func (a Account) name() (string, error) {
	switch {
	case a.User == "":
		return "", errNoName
	case a.Domain == "":
		return a.User, nil
	}
	return a.Domain + `\` + a.User, nil
}

// Enrich implements pipeline.Enricher. It stops at ctx's end; what it did
// not look up stays absent.
func (e Enricher) Enrich(ctx context.Context, s *snapshot.Snapshot) {
	lookup := e.Lookup
	if lookup == nil {
		lookup = Lookup
	}
	for i := range s.Processes {
		p := &s.Processes[i]
		if ctx.Err() != nil {
			return
		}
		if p.Owner.User != "" {
			continue
		}
		acct, err := lookup(p.PID)
		if err != nil {
			continue
		}
		name, err := acct.name()
		if err != nil {
			continue
		}
		p.Owner.User, p.Owner.UID = name, acct.SID
	}
}
