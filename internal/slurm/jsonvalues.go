package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Slurm's JSON changed shape between data_parser versions. These types read
// both shapes of the same field so that one struct serves every version.

// flexNumber is a number written either plainly (openapi v0.0.38, Slurm
// 22.05: "cpus": 4) or as an object (v0.0.40+, Slurm 23.11+: "cpus":
// {"set": true, "infinite": false, "number": 4}). Null, unset or infinite
// values read as absent.
type flexNumber struct {
	Value int64
	Set   bool
}

func (n *flexNumber) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		*n = flexNumber{}
		return nil
	}
	if b[0] == '{' {
		var obj struct {
			Set      bool    `json:"set"`
			Infinite bool    `json:"infinite"`
			Number   float64 `json:"number"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return err
		}
		*n = flexNumber{Value: int64(obj.Number), Set: obj.Set && !obj.Infinite}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("want a number or {set,infinite,number}, got %.40s", b)
	}
	*n = flexNumber{Value: int64(f), Set: true}
	return nil
}

// Int returns the value, 0 when absent.
func (n flexNumber) Int() int { return int(n.Value) }

// flexStrings is a string or a list of strings: job_state is "RUNNING" in
// v0.0.38 and ["RUNNING"] (base state then flags) from v0.0.40; node state
// likewise ("mixed" + state_flags, or ["MIXED","DRAIN"]).
type flexStrings []string

func (s *flexStrings) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		*s = nil
	case b[0] == '[':
		var list []string
		if err := json.Unmarshal(b, &list); err != nil {
			return err
		}
		*s = list
	default:
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return fmt.Errorf("want a string or a list of strings, got %.40s", b)
		}
		*s = flexStrings{one}
	}
	return nil
}

// flexHostlist is a hostlist written as one expression ("gpu-[1-2]") or as
// a list of names or expressions (v0.0.40 sinfo "nodes/nodes").
type flexHostlist []string

func (h *flexHostlist) UnmarshalJSON(b []byte) error {
	var parts flexStrings
	if err := parts.UnmarshalJSON(b); err != nil {
		return err
	}
	var out []string
	for _, p := range parts {
		names, err := ExpandHostlist(p)
		if err != nil {
			return err
		}
		out = append(out, names...)
	}
	*h = out
	return nil
}

// jsonErrors is the "errors" list every Slurm JSON answer carries.
type jsonErrors []struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	ErrorNumber int    `json:"error_number"`
	ErrorCode   int    `json:"error_code"`
}

// err returns the first reported error, or nil.
func (e jsonErrors) err(cmd string) error {
	for _, x := range e {
		msg := x.Description
		if msg == "" {
			msg = x.Error
		}
		if msg == "" && x.ErrorNumber == 0 && x.ErrorCode == 0 {
			continue
		}
		return fmt.Errorf("%s --json reported an error: %s (error number %d)", cmd, msg, x.ErrorNumber+x.ErrorCode)
	}
	return nil
}

// jsonSyntaxError turns encoding/json's error into one that says where.
func jsonSyntaxError(what string, data []byte, err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		line, col := lineCol(data, se.Offset)
		return fmt.Errorf("%s: invalid JSON at line %d column %d: %v", what, line, col, err)
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		line, col := lineCol(data, te.Offset)
		return fmt.Errorf("%s: field %q at line %d column %d: want %s, got %s", what, te.Field, line, col, te.Type, te.Value)
	}
	return fmt.Errorf("%s: %v", what, err)
}

func lineCol(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	line = 1 + bytes.Count(data[:offset], []byte("\n"))
	col = int(offset) - bytes.LastIndexByte(data[:offset], '\n')
	return line, col
}
