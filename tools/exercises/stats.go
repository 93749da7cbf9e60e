package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// stats prints, per stage, how many lines of code a learner writes on
// each track against the stage's code: its module's Go files but tests and
// cmd/ (the demos), counting lines with code on them (not blank, not only
// a comment).
func stats(w io.Writer, root string, stages []string) error {
	modules, err := stageModules(root, stages)
	if err != nil {
		return err
	}
	all, err := findExercises(root, stages)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%-22s %8s  %-18s %-18s\n", "stage", "code", "fill track", "build track")
	var total, totalFill, totalBuild int
	for _, module := range modules {
		code, err := moduleCodeLines(filepath.Join(root, module))
		if err != nil {
			return err
		}
		var exs []*Exercise
		for _, e := range all {
			if e.Module == module {
				exs = append(exs, e)
			}
		}
		fill, err := writtenLines(root, forTrack(exs, TrackFill))
		if err != nil {
			return err
		}
		build, err := writtenLines(root, forTrack(exs, TrackBuild))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-22s %8d  %-18s %-18s\n", module, code, share(fill, code), share(build, code))
		total, totalFill, totalBuild = total+code, totalFill+fill, totalBuild+build
	}
	fmt.Fprintf(w, "%-22s %8d  %-18s %-18s\n", "all", total, share(totalFill, total), share(totalBuild, total))
	return nil
}

// share is "412 (8.3%)".
func share(n, of int) string {
	if of == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%.1f%%)", n, 100*float64(n)/float64(of))
}

// writtenLines counts the code lines of the tasks' regions as the
// reference has them: for a build task, its functions' bodies.
func writtenLines(root string, exs []*Exercise) (int, error) {
	n := 0
	for file, fileExs := range byFile(exs) {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return 0, err
		}
		lines := strings.Split(string(src), "\n")
		for _, e := range fileExs {
			if e.Kind == Build {
				for _, f := range e.funcs {
					if f.ToLine > f.FromLine {
						n += codeLines(lines[f.FromLine : f.ToLine-1])
					} else {
						n++ // a body on one line
					}
				}
				continue
			}
			n += codeLines(lines[e.codeFrom-1 : e.End-1])
		}
	}
	return n, nil
}

// moduleCodeLines counts the code lines of a module's Go files, but tests
// and cmd/.
func moduleCodeLines(dir string) (int, error) {
	n := 0
	err := walkSources(dir, []string{"cmd"}, func(_ string, src []byte) error {
		n += codeLines(strings.Split(string(src), "\n"))
		return nil
	})
	return n, err
}

// codeLines counts the lines that are not blank and not only a // comment.
func codeLines(lines []string) int {
	n := 0
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "//") {
			n++
		}
	}
	return n
}
