package slurm

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// scanPipeRecords reads the '|'-separated lines that Slurm's formatted
// output (-o, -O) prints, the fallback for Slurm without --json. Blank
// lines are skipped; a line without exactly n fields is an error naming
// the command and the line. record gets each line's trimmed fields and the
// line number for its own error messages.
func scanPipeRecords(data []byte, command string, n int, record func(line int, f []string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Split(text, "|")
		if len(f) != n {
			return fmt.Errorf("%s: line %d: want %d '|'-separated fields, got %d: %.80q", command, line, n, len(f), text)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if err := record(line, f); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: line %d: %w", command, line+1, err)
	}
	return nil
}
