package winowner

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// Lookup returns the account that owns process pid: its token's user.
// Query-limited access is what another user's process grants a member
// of Administrators (and a service running as LocalSystem); a process it
// does not grant, or one that ended, is an error.
func Lookup(pid uint32) (Account, error) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		return Account{}, fmt.Errorf("OpenProcess %d: %w", pid, err)
	}
	defer windows.CloseHandle(h) //nolint:errcheck // a handle only read from
	var token windows.Token
	if err := windows.OpenProcessToken(h, windows.TOKEN_QUERY, &token); err != nil {
		return Account{}, fmt.Errorf("OpenProcessToken %d: %w", pid, err)
	}
	defer token.Close() //nolint:errcheck // a handle only read from
	tu, err := token.GetTokenUser()
	if err != nil {
		return Account{}, fmt.Errorf("GetTokenInformation(TokenUser) %d: %w", pid, err)
	}
	user, domain, _, err := tu.User.Sid.LookupAccount("")
	if err != nil {
		return Account{}, fmt.Errorf("LookupAccountSid %d: %w", pid, err)
	}
	return Account{Domain: domain, User: user, SID: tu.User.Sid.String()}, nil
}
