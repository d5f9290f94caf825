//go:build !windows

package winowner

import "errors"

// Lookup has nothing to ask: process tokens are Windows'. On Linux the
// attribution package reads owners from procfs.
func Lookup(uint32) (Account, error) {
	return Account{}, errors.New("process owners from access tokens are looked up on Windows only")
}
