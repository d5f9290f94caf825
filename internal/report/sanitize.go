package report

import (
	"strings"
	"unicode"
)

// Owner names come from whoever named the pod, container or compose service,
// and reach a terminal, a Markdown renderer or a browser. These make them
// inert there.

// printable replaces control characters (C0, DEL, C1: a terminal acts on
// them), the bidirectional formatting characters (they reorder what a reader
// sees) and invalid UTF-8 with U+FFFD.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar || isBidiControl(r) || r == '\u2028' || r == '\u2029' {
			return unicode.ReplacementChar
		}
		return r
	}, s)
}

func isBidiControl(r rune) bool {
	return (r >= '\u200e' && r <= '\u200f') || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}

// markdownEscaper keeps text literal in CommonMark and GitHub tables: no raw
// HTML (entities for < > &), no emphasis, code, links or strikethrough, no
// cell break.
var markdownEscaper = strings.NewReplacer(
	"&", "&amp;", "<", "&lt;", ">", "&gt;",
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "|", `\|`, "~", `\~`,
)

func markdownEscape(s string) string { return markdownEscaper.Replace(s) }
