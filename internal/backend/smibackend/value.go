package smibackend

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// State is what nvidia-smi said about one field of one GPU.
type State int

// The states of a field. Every state but Present leaves the reading absent.
const (
	// Present: a value that parsed.
	Present State = iota
	// NotAvailable: "[N/A]", the GPU has no such reading (a GeForce's
	// ECC counters, a fanless module's fan).
	NotAvailable
	// NotSupported: "[Not Supported]", the driver cannot read it on this GPU.
	NotSupported
	// ReadError: "[Unknown Error]" or another bracketed error
	// ("[Insufficient Permissions]"): a reading that failed.
	ReadError
	// GPULost: "[GPU is lost]": the GPU fell off the bus.
	GPULost
	// Garbage: a value that does not parse as the field's type.
	Garbage
)

func (s State) String() string {
	switch s {
	case Present:
		return "present"
	case NotAvailable:
		return "not_available"
	case NotSupported:
		return "not_supported"
	case ReadError:
		return "read_error"
	case GPULost:
		return "gpu_lost"
	}
	return "garbage"
}

// errGarbage marks a value that does not parse as its field's type.
var errGarbage = errors.New("does not parse")

// classify tells a value nvidia-smi could not give from one to parse. The
// bracketed forms are those nvidia-smi's documentation lists; an unknown
// bracketed text is a failed read.
func classify(raw string) State {
	v := strings.TrimSpace(raw)
	switch strings.ToLower(strings.Trim(v, "[]")) {
	case "n/a", "":
		return NotAvailable
	case "not supported":
		return NotSupported
	case "gpu is lost":
		return GPULost
	}
	if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
		return ReadError
	}
	return Present
}

// number parses a decimal number as nvidia-smi prints it with nounits:
// "42", "73.51", or, from an nvidia-smi running in a locale with decimal
// commas, "73,51". A thousands separator is never printed, so one comma is
// a decimal separator; anything else (a unit, two separators, NaN) is
// garbage.
func number(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if strings.Count(s, ",") == 1 && !strings.Contains(s, ".") {
		s = strings.Replace(s, ",", ".", 1)
	}
	if s == "" || strings.ContainsAny(s, "_xXpPeEiInN") {
		// Go's parser accepts hex floats, exponents, "Inf", "NaN" and
		// digit separators; nvidia-smi prints none of them.
		return 0, fmt.Errorf("%q %w as a number", s, errGarbage)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q %w as a number", s, errGarbage)
	}
	return v, nil
}

// whole parses a non-negative whole number ("7", "7.0" is garbage).
func whole(s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q %w as a whole number", s, errGarbage)
	}
	return v, nil
}
