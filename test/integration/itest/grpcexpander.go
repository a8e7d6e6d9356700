package itest

import (
	"strings"
)

// GrepLines returns the lines of text that contain substr.
func GrepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
