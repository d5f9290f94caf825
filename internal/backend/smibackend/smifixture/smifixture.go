// Package smifixture answers nvidia-smi queries from the project's fixture
// files (internal/backend/smibackend/testdata, whose README describes them), as
// nvidia-smi answers them: the properties asked for, in the order asked,
// and the refusal of a whole query that names a property the driver does
// not list. The parser tests and the fake nvidia-smi share it.
package smifixture

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// ErrInvalidField is nvidia-smi's refusal of a query, exit status 2.
type ErrInvalidField struct{ Field string }

func (e ErrInvalidField) Error() string {
	return fmt.Sprintf("Field \"%s\" is not a valid field to query.", e.Field)
}

// aliases maps every property name the help text lists to all the names
// of its paragraph (`"name" or "gpu_name"`).
func aliases(help []byte) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(help))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, `"`) {
			continue
		}
		var names []string
		for part := range strings.SplitSeq(line, " or ") {
			names = append(names, strings.Trim(strings.TrimSpace(part), `"`))
		}
		for _, n := range names {
			out[n] = names
		}
	}
	return out
}

// renamed is the name a property had before or after the R535 rename of
// clock throttle reasons to clock event reasons.
func renamed(name string) string {
	if rest, ok := strings.CutPrefix(name, "clocks_throttle_reasons."); ok {
		return "clocks_event_reasons." + rest
	}
	if rest, ok := strings.CutPrefix(name, "clocks_event_reasons."); ok {
		return "clocks_throttle_reasons." + rest
	}
	return name
}

// Answer prints, for each GPU row of the fixture, the requested
// properties joined by ", " (--format=csv,noheader,nounits). A property
// the help lists and the fixture has no column for is "[N/A]"; one the
// help does not list refuses the whole query.
func Answer(help, fixture []byte, requested []string) ([]byte, error) {
	known := aliases(help)
	lines := strings.Split(strings.TrimRight(string(fixture), "\n"), "\n")
	header := strings.Split(lines[0], ", ")
	column := make([]int, len(requested))
	for i, name := range requested {
		names, ok := known[name]
		if !ok {
			return nil, ErrInvalidField{name}
		}
		column[i] = -1
		for c, h := range header {
			for _, n := range names {
				if h == n || h == renamed(n) {
					column[i] = c
				}
			}
		}
	}
	var out bytes.Buffer
	for _, line := range lines[1:] {
		if raw, ok := strings.CutPrefix(line, "!"); ok {
			out.WriteString(raw + "\n")
			continue
		}
		values := strings.Split(line, ", ")
		picked := make([]string, len(column))
		for i, c := range column {
			picked[i] = "[N/A]"
			if c >= 0 && c < len(values) {
				picked[i] = values[c]
			}
		}
		out.WriteString(strings.Join(picked, ", ") + "\n")
	}
	return out.Bytes(), nil
}

// Rows prints a fixture's rows without its header line: the answer of a
// query whose columns the fixture has in order (--query-compute-apps).
func Rows(fixture []byte) []byte {
	_, rows, _ := bytes.Cut(fixture, []byte("\n"))
	return rows
}
