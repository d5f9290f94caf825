package doctor

import (
	"io/fs"
	"syscall"
)

// ownerUID is the owner of a file.
func ownerUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
