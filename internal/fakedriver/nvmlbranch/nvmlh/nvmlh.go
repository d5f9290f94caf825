// Package nvmlh reads the two things gpuwatch needs from an NVIDIA nvml.h:
// the functions it declares (name, return type, parameters) and the field
// IDs it defines (NVML_FI_*). It is a line-oriented reader for the header's
// regular layout, not a C parser; ParseHeader fails when a declaration
// does not fit that layout, so a new header that breaks the assumptions is
// noticed instead of silently losing functions.
package nvmlh

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Param is one parameter of a declared function, as written in nvml.h.
type Param struct {
	Type string // C type with qualifiers and pointer stars, e.g. "const char *"
	Name string
}

// Function is one function declared in nvml.h.
type Function struct {
	Name    string
	Returns string // "nvmlReturn_t", or "const char*" for nvmlErrorString
	Params  []Param
}

// Field is one NVML_FI_* field ID.
type Field struct {
	Name string // e.g. NVML_FI_DEV_ECC_CURRENT
	ID   uint32
}

// Header is what ParseHeader found in one nvml.h.
type Header struct {
	Functions []Function // sorted by name
	Fields    []Field    // sorted by ID
	// FieldMax is NVML_FI_MAX: one more than the largest field ID.
	FieldMax uint32
}

var (
	lineComment  = regexp.MustCompile(`//.*`)
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	declaration  = regexp.MustCompile(`^(?:DEPRECATED\([^)]*\)\s*)?(nvmlReturn_t|const)\s+DECLDIR\s+(char\s*\*\s*)?(nvml\w+)\s*\((.*)\)\s*$`)
	fieldDefine  = regexp.MustCompile(`^#define\s+(NVML_FI_\w+)\s+(\d+)\b`)
	paramSplit   = regexp.MustCompile(`^(.*?)(\w+)\s*(\[\s*\w*\s*\])?$`)
)

// ParseHeader reads the declarations and field IDs of one nvml.h.
func ParseHeader(src []byte) (*Header, error) {
	text := blockComment.ReplaceAllStringFunc(string(src), func(c string) string {
		return strings.Repeat("\n", strings.Count(c, "\n")) // keep line numbers
	})
	lines := strings.Split(text, "\n")
	h := &Header{}
	seen := map[string]bool{}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lineComment.ReplaceAllString(lines[i], ""))
		if m := fieldDefine.FindStringSubmatch(line); m != nil {
			id, err := strconv.ParseUint(m[2], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("nvml.h:%d: %s: %v", i+1, m[1], err)
			}
			if m[1] == "NVML_FI_MAX" {
				h.FieldMax = uint32(id)
				continue
			}
			h.Fields = append(h.Fields, Field{Name: m[1], ID: uint32(id)})
			continue
		}
		if !strings.Contains(line, "DECLDIR") || strings.HasPrefix(line, "#") {
			continue
		}
		// A declaration may span lines: join up to its semicolon.
		start := i + 1
		for !strings.Contains(line, ";") {
			i++
			if i >= len(lines) {
				return nil, fmt.Errorf("nvml.h:%d: declaration without ';'", start)
			}
			line += " " + strings.TrimSpace(lineComment.ReplaceAllString(lines[i], ""))
		}
		decl := strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), ";")), " ")
		m := declaration.FindStringSubmatch(decl)
		if m == nil {
			return nil, fmt.Errorf("nvml.h:%d: declaration not understood: %s", start, decl)
		}
		f := Function{Name: m[3], Returns: "nvmlReturn_t"}
		if m[1] == "const" {
			if m[2] == "" {
				return nil, fmt.Errorf("nvml.h:%d: declaration not understood: %s", start, decl)
			}
			f.Returns = "const char*"
		}
		params, err := parseParams(m[4])
		if err != nil {
			return nil, fmt.Errorf("nvml.h:%d: %s: %v", start, f.Name, err)
		}
		f.Params = params
		if seen[f.Name] {
			continue // declared twice (e.g. under both sides of an #ifdef)
		}
		seen[f.Name] = true
		h.Functions = append(h.Functions, f)
	}
	if len(h.Functions) == 0 || len(h.Fields) == 0 || h.FieldMax == 0 {
		return nil, fmt.Errorf("nvml.h: found %d functions, %d field IDs, NVML_FI_MAX %d: not an nvml.h?",
			len(h.Functions), len(h.Fields), h.FieldMax)
	}
	slices.SortFunc(h.Functions, func(a, b Function) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(h.Fields, func(a, b Field) int { return int(a.ID) - int(b.ID) })
	return h, nil
}

func parseParams(s string) ([]Param, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "void" {
		return nil, nil
	}
	var out []Param
	for i, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		m := paramSplit.FindStringSubmatch(p)
		if m == nil || strings.TrimSpace(m[1]) == "" {
			return nil, fmt.Errorf("parameter %d not understood: %q", i+1, p)
		}
		typ := strings.TrimSpace(m[1])
		if m[3] != "" { // an array parameter is a pointer
			typ += " *"
		}
		out = append(out, Param{Type: typ, Name: m[2]})
	}
	return out, nil
}

// Function returns the declaration of name, if the header has one.
func (h *Header) Function(name string) (Function, bool) {
	i, ok := slices.BinarySearchFunc(h.Functions, name, func(f Function, n string) int { return strings.Compare(f.Name, n) })
	if !ok {
		return Function{}, false
	}
	return h.Functions[i], true
}
