package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// hintsFile is where a stage's progressive hints live, out of the code:
// docs/hints/01.md holds a section "## 01.3: title" per task, with
// subsections "### Hint 1" to "### Hint 3", each closer to the answer.
func hintsFile(root, stage string) string {
	return filepath.Join(root, "docs", "hints", stage+".md")
}

var (
	hintTaskRe  = regexp.MustCompile(`^## (\d\d\.(?:[1-9]\d*|[A-Z]))\b`)
	hintLevelRe = regexp.MustCompile(`^### Hint ([1-9])\s*$`)
)

// readHints returns the hints of one task from its stage's file, by level
// (hints[0] is level 1); nil when the file has none for it.
func readHints(root, id string) ([]string, error) {
	data, err := os.ReadFile(hintsFile(root, id[:2]))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var hints []string
	in, level := false, 0
	var cur strings.Builder
	flush := func() {
		if level > 0 {
			hints = append(hints, strings.TrimSpace(cur.String()))
		}
		cur.Reset()
	}
	for i, line := range strings.Split(string(data), "\n") {
		if m := hintTaskRe.FindStringSubmatch(line); m != nil || strings.HasPrefix(line, "## ") {
			if in {
				flush()
				return hints, nil
			}
			in = m != nil && m[1] == id
			continue
		}
		if !in {
			continue
		}
		if m := hintLevelRe.FindStringSubmatch(line); m != nil {
			flush()
			n, _ := strconv.Atoi(m[1])
			if n != level+1 {
				return nil, fmt.Errorf("%s:%d: %s's hint %d follows hint %d: number them 1, 2, 3", hintsFile(root, id[:2]), i+1, id, n, level)
			}
			level = n
			continue
		}
		if level > 0 {
			cur.WriteString(line + "\n")
		}
	}
	if in {
		flush()
	}
	return hints, nil
}

// hint prints a task's hints from level 1 up to level.
func hint(w io.Writer, root, id string, level int) error {
	e, err := findTask(root, id)
	if err != nil {
		return err
	}
	hints, err := readHints(root, id)
	if err != nil {
		return err
	}
	if len(hints) == 0 && e.Hint != "" {
		hints = []string{e.Hint}
	}
	if len(hints) == 0 {
		return fmt.Errorf("%s %s has no hints yet (%s)", e.Kind, id, hintsFile(root, id[:2]))
	}
	level = max(1, min(level, len(hints)))
	fmt.Fprintf(w, "%s %s: %s (%s)\n", e.Kind, e.ID, e.Title, e.Where())
	for i, h := range hints[:level] {
		fmt.Fprintf(w, "\nhint %d of %d:\n%s\n", i+1, len(hints), indentLines(h, "  "))
	}
	if level < len(hints) {
		fmt.Fprintf(w, "\nmore: make hint EX=%s LEVEL=%d\n", id, level+1)
	} else {
		fmt.Fprintf(w, "\nstill stuck: make solution EX=%s shows the reference's code\n", id)
	}
	return nil
}

// solution prints the reference's code of a task: from the copy's
// solutions when this is a learner's copy that blanked it, else from the
// source itself.
func solution(w io.Writer, root, id string) error {
	if data, err := os.ReadFile(filepath.Join(root, solutionsDir, id+".txt")); err == nil {
		_, err = w.Write(data)
		return err
	}
	e, err := findTask(root, id)
	if err != nil {
		return err
	}
	if e.Blank {
		return fmt.Errorf("%s %s is blank here and this copy keeps no solution for it", e.Kind, id)
	}
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(e.File)))
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, solutionText(e, src))
	return err
}

// findTask finds one task by id.
func findTask(root, id string) (*Exercise, error) {
	exs, err := findExercises(root, []string{id[:2]})
	if err != nil {
		return nil, err
	}
	found, err := onlyIDs(exs, []string{id})
	if err != nil {
		return nil, err
	}
	return found[0], nil
}

// indentLines indents every line of s.
func indentLines(s, indent string) string {
	return indent + strings.ReplaceAll(s, "\n", "\n"+indent)
}
