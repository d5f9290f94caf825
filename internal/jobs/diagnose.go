package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Diagnosis is what `gpuwatch doctor` says of an accounting directory.
type Diagnosis struct {
	// Missing: the directory does not exist yet (serve creates it).
	Missing bool
	// Untrusted is why the directory cannot hold the journal (owner,
	// modes); nil when it can.
	Untrusted error
	// Pending counts the ended jobs' records the checkpoint holds that a
	// running gpuwatch could not write to the journal yet.
	Pending int
	// Obstacles are what the journal's reads skip or its rotation cannot
	// move (a directory or link where a journal file should be).
	Obstacles []string
	// CorruptKept are checkpoints moved aside as unreadable.
	CorruptKept []string
}

// Diagnose checks the accounting directory dir without changing it.
func Diagnose(dir string) Diagnosis {
	var d Diagnosis
	abs, err := filepath.Abs(dir)
	if err != nil {
		d.Untrusted = err
		return d
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		d.Missing = true
		existing := filepath.Dir(abs)
		for _, err := os.Stat(existing); errors.Is(err, os.ErrNotExist) && existing != "/"; _, err = os.Stat(existing) {
			existing = filepath.Dir(existing)
		}
		d.Untrusted = checkAncestors(filepath.Join(existing, "x"))
		return d
	}
	sd, trust, err := openTrusted(abs)
	if err != nil {
		d.Untrusted = err
		return d
	}
	defer sd.close()
	d.Untrusted = errors.Join(trust, checkAncestors(abs))
	names, _ := sd.f.Readdirnames(-1)
	slices.Sort(names)
	for _, name := range names {
		_, rotated := rotatedNumber(name)
		if name == JournalName || name == CheckpointName || rotated {
			if k, err := sd.kind(name); err == nil && k != syscall.S_IFREG {
				d.Obstacles = append(d.Obstacles, name)
			}
		}
		if len(name) > len(CheckpointName+CorruptCheckpointSuffix) && name[:len(CheckpointName+CorruptCheckpointSuffix)] == CheckpointName+CorruptCheckpointSuffix {
			d.CorruptKept = append(d.CorruptKept, name)
		}
	}
	if data, err := readSmall(sd, CheckpointName); err == nil {
		if c, err := parseCheckpoint(data); err == nil {
			d.Pending = len(c.Pending)
		}
	}
	return d
}
