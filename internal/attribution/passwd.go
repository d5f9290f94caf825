package attribution

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// userDB maps uids to user names from a passwd file.
//
// It parses the file itself rather than calling os/user: with cgo, os/user
// goes through NSS and, without it, reads /etc/passwd; either way it reads
// the passwd of the exporter's own container, not the host's, while the
// uids in /proc are the host's. With --path.rootfs the host's file is at
// <rootfs>/etc/passwd. Users only known through LDAP/SSSD are not in the
// file and stay nameless (their uid is still reported).
type userDB struct {
	path string

	mu      sync.Mutex
	names   map[string]string // uid → name
	modTime time.Time
	size    int64
	loadErr error // last error, reported once per change
}

func newUserDB(path string) *userDB {
	return &userDB{path: path}
}

// refresh re-reads the file when its modification time or size changed
// since the last read. It returns an error only when that is new, so a
// missing file is logged once, not on every scrape.
func (db *userDB) refresh() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	fi, err := os.Stat(db.path)
	if err != nil {
		isNew := db.loadErr == nil || db.loadErr.Error() != err.Error()
		db.loadErr = err
		db.names, db.modTime, db.size = nil, time.Time{}, 0
		if isNew {
			return fmt.Errorf("passwd file: %w", err)
		}
		return nil
	}
	if db.names != nil && fi.ModTime().Equal(db.modTime) && fi.Size() == db.size {
		return nil
	}
	data, err := os.ReadFile(db.path)
	if err != nil {
		db.loadErr = err
		return fmt.Errorf("passwd file: %w", err)
	}
	db.names = parsePasswd(data)
	db.modTime, db.size, db.loadErr = fi.ModTime(), fi.Size(), nil
	return nil
}

// name returns the user name for uid, or "" when the file does not list it.
func (db *userDB) name(uid string) string {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.names[uid]
}

// parsePasswd reads passwd(5) lines, "name:password:uid:gid:gecos:home:shell".
// Comments, NIS "+"/"-" entries and malformed lines are skipped. When a uid
// appears twice the first entry wins, as with getpwuid.
func parsePasswd(data []byte) map[string]string {
	names := make(map[string]string)
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue
		}
		fields := strings.SplitN(line, ":", 4)
		if len(fields) < 4 || fields[0] == "" || !isDecimal(fields[2]) {
			continue
		}
		if _, dup := names[fields[2]]; !dup {
			names[fields[2]] = fields[0]
		}
	}
	return names
}
