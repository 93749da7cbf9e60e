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
	Timeout     time.Duration // go test's -timeout, for a package's run
	TestTimeout time.Duration // one test's bound (see goTester.TestTimeout)
	Race        bool
	RaceSet     bool // Race was asked for (or against); otherwise raceStages decide
	Verbose     bool // whole outputs of failing tests, not excerpts
	Track       string
	IDs         []string // only these tasks
	Gate        bool     // in a learner's copy, a stage whose tasks all pass runs its module's tests and the next stage's
}

// raceStages are the stages whose tests check runs with -race unless told
// otherwise: their code is concurrent (the reactor, the purgatory and the
// ISR, the controller and the coordinators), and a data race there passes
// a test as often as not.
var raceStages = []string{"02", "04", "05"}

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
	m := readManifest(root)
	if len(stages) == 0 && m != nil && len(m.Stages) > 0 {
		stages = m.Stages // a copy grades the stages it blanked
	}
	all, err := findExercises(root, stages)
	if err != nil {
		return err
	}
	if m != nil {
		commit := m.SourceCommit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if commit != "" {
			commit = " at " + commit
		}
		track := m.Track
		if track == "" {
			track = TrackFill
		}
		fmt.Fprintf(w, "a learner's copy of the workbook%s, the %s track, stages %s blanked when it was written\n",
			commit, track, strings.Join(m.Stages, ", "))
	}
	track := opts.Track
	if track == "" && m != nil {
		track = m.Track
	}
	if track, err = parseTrack(track); err != nil {
		return err
	}
	trackExs := forTrack(all, track)
	if m != nil {
		// In a copy, the tasks are those it blanked: a build task of the
		// fill track's copy is reference code, not the learner's.
		trackExs = slices.DeleteFunc(trackExs, func(e *Exercise) bool { return !slices.Contains(m.Exercises, e.ID) })
	}
	exs, err := onlyIDs(trackExs, opts.IDs)
	if err != nil {
		return err
	}
	if len(exs) == 0 {
		fmt.Fprintln(w, "no tasks marked"+stagesPhrase(stages)+" for the "+track+" track")
		return nil
	}
	keys, tests := testsByPackage(exs)
	results := map[pkgKey]*pkgResult{}
	raced := map[pkgKey]bool{}
	docs := map[pkgKey]map[string]string{}
	for _, k := range keys {
		race := opts.Race
		if !opts.RaceSet {
			race = slices.Contains(raceStages, stageOfModule(k.Module))
			if race && !raceAvailable() {
				race = false
				fmt.Fprintf(w, "(-race needs cgo and a C compiler, which this machine lacks: %s runs without it; make doctor says what to install)\n", k.Module)
			}
		}
		raced[k] = race
		flags := ""
		if race {
			flags = " (-race)"
		}
		fmt.Fprintf(w, "running %s %s%s: %s\n", k.Module, k.Pkg, flags, strings.Join(tests[k], ", "))
		g := &goTester{Dir: filepath.Join(root, k.Module), Timeout: opts.Timeout, Race: race, TestTimeout: opts.TestTimeout}
		if results[k], err = g.run(k.Pkg, tests[k]); err != nil {
			return err
		}
		docs[k] = testDocs(filepath.Join(root, k.Module, filepath.FromSlash(k.Pkg)))
	}
	ctx := &reportContext{results: results, raced: raced, docs: docs, all: trackExs, verbose: opts.Verbose}
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
			if report(w, e, width, ctx) {
				passed++
			}
		}
		fmt.Fprintf(w, "\nstage %s: %d of %d tasks pass\n", st, passed, len(stageExs))
		if passed < len(stageExs) {
			failed = true
			continue
		}
		if m != nil && opts.Gate && len(opts.IDs) == 0 {
			if !stageGate(w, root, stageExs[0].Module, track, m, opts) {
				failed = true
			}
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
func report(w io.Writer, e *Exercise, width int, ctx *reportContext) bool {
	results, verbose := ctx.results, ctx.verbose
	state := "written"
	if e.Blank {
		state = "blank"
	}
	if e.Kind == Build {
		state += ", build"
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
			if other := reachedExercise(r.Output); other != "" && other != e.Kind.String()+" "+e.ID {
				l.note = "stopped at " + other + ", which is still blank"
			} else if hung := hangingTask(r.Output, ctx.all); hung != nil && timedOut(r.Output) {
				l.note = fmt.Sprintf("timed out in %s %s (%s): a loop that never ends, a wait nothing wakes, or a panic under a lock the test waits for", hung.task.Kind, hung.task.ID, hung.where)
			} else if timedOut(r.Output) && hung == nil && !verbose {
				l.note = "timed out, in no task's code: make check EX=" + e.ID + " -v shows the goroutine dump"
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
				if doc := ctx.docs[pkgKey{e.Module, t.Pkg}][t.Name]; doc != "" {
					for _, x := range strings.Split(doc, "\n") {
						details = append(details, "        # "+x)
					}
				}
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
	if e.Kind == Build && !e.Blank && e.blankFuncs > 0 {
		pass = false
		lines = append(lines, line{status: "FAIL", name: fmt.Sprintf("%d of %d functions are still the task's panic: a build task passes once every one is written", e.blankFuncs, len(e.funcs))})
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
		if e.Hint != "" {
			fmt.Fprintf(w, "        hint: %s\n", e.Hint)
		}
		fmt.Fprintf(w, "        more: make hint EX=%s (levels 1-3)\n", e.ID)
		if !e.Blank {
			for _, pkg := range e.Pkgs() {
				if names := byPkg[pkg]; len(names) > 0 {
					race := ""
					if ctx.raced[pkgKey{e.Module, pkg}] {
						race = " -race"
					}
					fmt.Fprintf(w, "        run:  cd %s && go test -count=1%s -run '%s' %s\n", e.Module, race, runPattern(names), pkg)
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

// readManifest reads a learner's copy's manifest, or nil in the reference.
func readManifest(root string) *manifest {
	data, err := os.ReadFile(filepath.Join(root, manifestName))
	if err != nil {
		return nil
	}
	var m manifest
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return &m
}
