package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

type checkOptions struct {
	Timeout time.Duration
	Race    bool
	Verbose bool // whole outputs of failing tests, not excerpts
}

// pkgKey names a package of a stage module.
type pkgKey struct{ Module, Pkg string }

// testsByPackage gathers the tests of exs by package, each once, in the
// order the exercises name them; keys lists the packages in that order.
func testsByPackage(exs []*Exercise) (keys []pkgKey, tests map[pkgKey][]string) {
	tests = map[pkgKey][]string{}
	for _, e := range exs {
		for _, t := range e.Tests {
			k := pkgKey{e.Module, t.Pkg}
			if _, ok := tests[k]; !ok {
				keys = append(keys, k)
			}
			if !slices.Contains(tests[k], t.Name) {
				tests[k] = append(tests[k], t.Name)
			}
		}
	}
	return keys, tests
}

// check runs the tests of each exercise of the stages (every stage when
// empty) and shows, per exercise, whether it is written and whether its
// tests pass, with the hint where they do not. It fails when an exercise
// does.
func check(w io.Writer, root string, stages []string, opts checkOptions) error {
	exs, err := findExercises(root, stages)
	if err != nil {
		return err
	}
	if data, err := os.ReadFile(filepath.Join(root, manifestName)); err == nil {
		var m manifest
		if json.Unmarshal(data, &m) == nil {
			commit := m.SourceCommit
			if len(commit) > 12 {
				commit = commit[:12]
			}
			if commit != "" {
				commit = " at " + commit
			}
			fmt.Fprintf(w, "a learner's copy of the workbook%s, stages %s blanked when it was written\n",
				commit, strings.Join(m.Stages, ", "))
		}
	}
	if len(exs) == 0 {
		fmt.Fprintln(w, "no exercises marked"+stagesPhrase(stages))
		return nil
	}
	keys, tests := testsByPackage(exs)
	results := map[pkgKey]*pkgResult{}
	for _, k := range keys {
		fmt.Fprintf(w, "running %s %s: %s\n", k.Module, k.Pkg, strings.Join(tests[k], ", "))
		g := &goTester{Dir: filepath.Join(root, k.Module), Timeout: opts.Timeout, Race: opts.Race}
		if results[k], err = g.run(k.Pkg, tests[k]); err != nil {
			return err
		}
	}
	failed := false
	for _, st := range stagesOf(exs) {
		var stageExs []*Exercise
		for _, e := range exs {
			if e.Stage == st {
				stageExs = append(stageExs, e)
			}
		}
		fmt.Fprintf(w, "\nstage %s (%s)\n", st, stageExs[0].Module)
		passed, width := 0, 0
		for _, e := range stageExs {
			width = max(width, len(e.Title))
		}
		for _, e := range stageExs {
			if report(w, e, width, results, opts.Verbose) {
				passed++
			}
		}
		fmt.Fprintf(w, "\nstage %s: %d of %d exercises pass\n", st, passed, len(stageExs))
		if passed < len(stageExs) {
			failed = true
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// stagesOf lists the stages of exs, in order.
func stagesOf(exs []*Exercise) []string {
	var stages []string
	for _, e := range exs {
		if !slices.Contains(stages, e.Stage) {
			stages = append(stages, e.Stage)
		}
	}
	return stages
}

// report prints one exercise's lines of check's table and says whether
// every one of its tests passed.
func report(w io.Writer, e *Exercise, width int, results map[pkgKey]*pkgResult, verbose bool) bool {
	state := "written"
	if e.Blank {
		state = "blank"
	}
	pass := true
	type line struct{ status, name, note string }
	var lines []line
	var details []string
	byPkg := map[string][]string{}
	for _, t := range e.Tests {
		res := results[pkgKey{e.Module, t.Pkg}]
		r := res.Tests[t.Name]
		name := t.Name
		if len(e.Pkgs()) > 1 || t.Pkg != e.ownPkg() {
			name = t.String()
		}
		l := line{status: r.Status, name: name}
		switch r.Status {
		case testPass:
			l.status = "ok"
		case testFail:
			pass = false
			l.status = "FAIL"
			if other := reachedExercise(r.Output); other != "" && other != e.ID {
				l.note = "stopped at exercise " + other + ", which is still blank"
			} else if !e.Blank && (verbose || len(details) == 0) {
				// The first failure says most; -v shows them all, whole.
				out := r.Output
				if !verbose {
					out = nil
					for _, x := range excerpt(r.Output, 12) {
						out = append(out, x+"\n")
					}
				}
				details = append(details, "        "+t.Name+":")
				for _, x := range out {
					details = append(details, "        | "+strings.TrimRight(x, "\n"))
				}
			}
		case testSkip:
			pass = false
			l.note = "skipped: " + lastLine(r.Output)
		case testMissing:
			pass = false
			l.note = "no such test in " + t.Pkg
		case testNotRun:
			pass = false
			if res.BuildFailed {
				l.note = "the package does not build"
			} else {
				l.note = "did not run: " + lastLine(res.Output)
			}
		}
		if r.Status != testPass {
			byPkg[t.Pkg] = append(byPkg[t.Pkg], t.Name)
		}
		lines = append(lines, l)
	}
	verdict := "pass"
	if !pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\n  %-5s %-*s  %-7s  %s\n", e.ID, width, e.Title, state, verdict)
	fmt.Fprintf(w, "        %s\n", e.Where())
	for _, l := range lines {
		note := ""
		if l.note != "" {
			note = "  (" + l.note + ")"
		}
		fmt.Fprintf(w, "        %-4s %s%s\n", l.status, l.name, note)
	}
	if pkgs := buildFailures(e, results); len(pkgs) > 0 {
		for _, out := range pkgs {
			for _, x := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
				fmt.Fprintf(w, "        | %s\n", x)
			}
		}
	}
	for _, d := range details {
		fmt.Fprintln(w, d)
	}
	if !pass {
		fmt.Fprintf(w, "        hint: %s\n", e.Hint)
		if !e.Blank {
			for _, pkg := range e.Pkgs() {
				if names := byPkg[pkg]; len(names) > 0 {
					fmt.Fprintf(w, "        run:  cd %s && go test -count=1 -run '%s' %s\n", e.Module, runPattern(names), pkg)
				}
			}
		}
	}
	return pass
}

// ownPkg is the package of the exercise's file, as its tests name it.
func (e *Exercise) ownPkg() string { return pkgOf(e.File, e.Module) }

// buildFailures are the compiler messages of the exercise's packages that
// did not build, once each.
func buildFailures(e *Exercise, results map[pkgKey]*pkgResult) []string {
	var outs []string
	for _, pkg := range e.Pkgs() {
		if r := results[pkgKey{e.Module, pkg}]; r.BuildFailed && !slices.Contains(outs, r.BuildOutput) {
			outs = append(outs, r.BuildOutput)
		}
	}
	return outs
}

// lastLine is the last line of output that says something.
func lastLine(output []string) string {
	for i := len(output) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(output[i]); t != "" && !strings.HasPrefix(t, "---") && t != "FAIL" && t != "PASS" {
			return t
		}
	}
	return "no output"
}
