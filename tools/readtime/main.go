// Command readtime prints the reading time of each "## " section of the
// book's chapters, by the rule the chapters' "Reading time" lines follow:
// prose (table cells included) at 150 words a minute, code and diagram
// lines at 30 a minute, a minute more for each table, rounded up, at least
// one minute.
//
//	go run ./tools/readtime docs/01-log.md [more.md ...]
package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strings"
)

// section is one "## " section's counts.
type section struct {
	name                string
	words, code, tables int
}

// minutes is the section's reading time.
func (s section) minutes() int {
	return max(1, int(math.Ceil(float64(s.words)/150+float64(s.code)/30+float64(s.tables))))
}

// sections reads a chapter's sections; text before the first "## " is
// not counted.
func sections(path string) ([]section, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []section
	var cur *section
	inCode, inTable := false, false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			inCode = !inCode
			continue
		}
		if strings.HasPrefix(line, "## ") && !inCode {
			out = append(out, section{name: trimmed})
			cur = &out[len(out)-1]
			inTable = false
			continue
		}
		if cur == nil {
			continue
		}
		switch {
		case inCode:
			cur.code++
		case strings.HasPrefix(trimmed, "|"):
			if !inTable {
				cur.tables++
			}
			inTable = true
			cur.words += len(strings.Fields(strings.ReplaceAll(trimmed, "|", " ")))
		case strings.HasPrefix(trimmed, "*Reading time"):
			inTable = false
		default:
			inTable = false
			cur.words += len(strings.Fields(line))
		}
	}
	return out, sc.Err()
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./tools/readtime docs/01-log.md [more.md ...]")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		secs, err := sections(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "readtime:", err)
			os.Exit(1)
		}
		total := 0
		fmt.Println(path)
		for _, s := range secs {
			total += s.minutes()
			fmt.Printf("  %4d min  %6d words %5d code lines %2d tables  %s\n", s.minutes(), s.words, s.code, s.tables, s.name)
		}
		fmt.Printf("  %4d min  in all\n", total)
	}
}
