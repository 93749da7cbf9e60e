package admin

import (
	"fmt"
	"io"
	"strings"
)

// table prints columns padded to their widest cell, as Kafka's tools
// print their tables (at least 15 wide, PARTITION 10, as theirs).
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer) {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = max(len(h), 15)
		if h == "PARTITION" {
			widths[i] = 10
		}
	}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i < len(cells)-1 {
				fmt.Fprintf(&b, "%-*s ", widths[i], c)
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
}
