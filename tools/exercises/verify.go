package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

type verifyOptions struct {
	Timeout time.Duration
	Race    bool
	// ListReference makes (a) check that every named test exists (go test
	// -list) without running it: for make test, which runs every stage's
	// tests anyway.
	ListReference bool
	// Parallel is how many tasks (b) checks at once (default: the CPUs).
	Parallel int
}

// blankTestTimeout bounds each test run with a task blanked: a blank
// panics at once, or hangs a test (a panic under a lock the test's
// cleanup waits for), and either way the test fails.
const blankTestTimeout = time.Minute

// verify is the check CI runs on the reference, for the exercises of the
// stages (every stage when empty):
//
//	(a) every exercise's tests exist and pass;
//	(b) each exercise blanked alone makes at least one of its tests fail,
//	    so none is ungraded (a blank that does not compile is its own error);
//	(c) with every exercise of a stage blanked at once, each package of the
//	    stage's module compiles: a learner's copy builds.
//
// Blanked files reach go through -overlay: nothing in the tree changes.
func verify(w io.Writer, root string, stages []string, opts verifyOptions) error {
	start := time.Now()
	exs, err := findExercises(root, stages)
	if err != nil {
		return err
	}
	if len(exs) == 0 {
		fmt.Fprintln(w, "verify: no exercises marked"+stagesPhrase(stages))
		return nil
	}
	tmp, err := os.MkdirTemp("", "exercises-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var problems []string
	problem := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		problems = append(problems, msg)
		fmt.Fprintf(w, "    PROBLEM: %s\n", indentAfterFirst(msg, "      "))
	}
	fmt.Fprintf(w, "verify: %s%s\n", tasksPhrase(exs), stagesPhrase(stages))

	fmt.Fprintln(w, "(a) the reference passes every task's tests")
	for _, e := range exs {
		if e.Blank {
			problem("%s %s (%s) is blank in the reference: the reference must hold the solution", e.Kind, e.ID, e.Where())
		}
	}
	keys, tests := testsByPackage(exs)
	for _, k := range keys {
		if opts.ListReference {
			t0 := time.Now()
			have, err := listTests(filepath.Join(root, k.Module), k.Pkg)
			if err != nil {
				problem("%s %s: %v", k.Module, k.Pkg, err)
				continue
			}
			fmt.Fprintf(w, "  %s %s: %d tests exist (listed, not run: the stage's own tests run them) (%s)\n", k.Module, k.Pkg, len(tests[k]), time.Since(t0).Round(100*time.Millisecond))
			for _, name := range tests[k] {
				if !slices.Contains(have, name) {
					problem("%s names %s, which %s %s does not have", exercisesNaming(exs, k, name), name, k.Module, k.Pkg)
				}
			}
			continue
		}
		g := &goTester{Dir: filepath.Join(root, k.Module), Timeout: opts.Timeout, Race: opts.Race}
		res, err := g.run(k.Pkg, tests[k])
		if err != nil {
			problem("%v", err)
			continue
		}
		fmt.Fprintf(w, "  %s %s: %d tests (%s)\n", k.Module, k.Pkg, len(tests[k]), res.Elapsed.Round(100*time.Millisecond))
		if res.BuildFailed {
			problem("%s %s does not build:\n%s", k.Module, k.Pkg, res.BuildOutput)
			continue
		}
		for _, name := range tests[k] {
			r := res.Tests[name]
			users := exercisesNaming(exs, k, name)
			switch r.Status {
			case testPass:
			case testMissing:
				problem("%s names %s, which %s %s does not have", users, name, k.Module, k.Pkg)
			case testFail:
				problem("%s fails on the reference (named by %s):\n%s", name, users, strings.Join(excerpt(r.Output, 20), "\n"))
			default:
				problem("%s %s on the reference (named by %s): %s", name, r.Status, users, lastLine(append(r.Output, res.Output...)))
			}
		}
	}

	fmt.Fprintln(w, "(b) each task, blanked alone (a break task: its variant in place), fails at least one of its tests")
	type bResult struct {
		line     string   // the task's line of the report
		problems []string // its problems
	}
	results := make([]chan bResult, len(exs))
	for i := range results {
		results[i] = make(chan bResult, 1)
	}
	workers := opts.Parallel
	if workers <= 0 {
		workers = min(runtime.NumCPU(), 4)
	}
	next := make(chan int)
	go func() {
		for i := range exs {
			next <- i
		}
		close(next)
	}()
	for range workers {
		go func() {
			for i := range next {
				line, probs := verifyBlank(exs[i], root, filepath.Join(tmp, fmt.Sprint("b", i)), opts)
				results[i] <- bResult{line, probs}
			}
		}()
	}
	for i := range exs {
		r := <-results[i]
		if r.line != "" {
			fmt.Fprintln(w, r.line)
		}
		for _, p := range r.problems {
			problem("%s", p)
		}
	}

	fmt.Fprintln(w, "(c) with all of a stage's tasks blanked, on each track, its module compiles")
	for _, st := range stagesOf(exs) {
		var stageExs []*Exercise
		for _, e := range exs {
			if e.Stage == st {
				stageExs = append(stageExs, e)
			}
		}
		module := stageExs[0].Module
		for _, track := range []string{TrackFill, TrackBuild} {
			blanked := forTrack(stageExs, track)
			if len(blanked) == 0 || track == TrackBuild && len(blanked) == len(forTrack(stageExs, TrackFill)) && !slices.ContainsFunc(blanked, func(e *Exercise) bool { return e.Kind == Build }) {
				continue // no build task in this stage: the build track blanks what the fill track does
			}
			t0 := time.Now()
			overlay, rename, err := writeOverlay(filepath.Join(tmp, "c"+st+track), root, blanked)
			if err != nil {
				problem("blanking stage %s (%s track): %v", st, track, err)
				continue
			}
			// go vet type-checks every package with its tests without linking
			// them; unreachable code after a region's panic is expected.
			cmd := exec.Command("go", "vet", "-unreachable=false", "-overlay", overlay, "./...")
			cmd.Dir = filepath.Join(root, module)
			out, err := cmd.CombinedOutput()
			took := time.Since(t0).Round(100 * time.Millisecond)
			if err != nil {
				fmt.Fprintf(w, "  stage %s (%s), %s track: does not compile (%s)\n", st, module, track, took)
				msg := string(out)
				for from, to := range rename {
					msg = strings.ReplaceAll(msg, from, to)
				}
				problem("with every task of stage %s's %s track blanked, %s does not compile:\n%s", st, track, module, strings.TrimSpace(msg))
				continue
			}
			fmt.Fprintf(w, "  stage %s (%s), %s track: %s blanked, every package compiles (%s)\n", st, module, track, plural(len(blanked), "task"), took)
		}
	}

	took := time.Since(start).Round(time.Second)
	if len(problems) > 0 {
		fmt.Fprintf(w, "\nverify: %d problems with %s (%s):\n", len(problems), tasksPhrase(exs), took)
		for _, p := range problems {
			fmt.Fprintf(w, "  - %s\n", indentAfterFirst(p, "    "))
		}
		return errReported
	}
	fmt.Fprintf(w, "\nverify: %s%s: all pass on the reference, each is graded by a test that fails when it is blank, every blanked stage compiles on both tracks (%s)\n",
		tasksPhrase(exs), stagesPhrase(stages), took)
	return nil
}

// writeOverlay writes, under dir, the files of blank with those exercises
// blanked (other exercises in the same files stay), and a go
// -overlay file mapping each original to its copy. rename maps the copies'
// paths back to the originals' for messages.
func writeOverlay(dir, root string, blank []*Exercise) (overlay string, rename map[string]string, err error) {
	replace := map[string]string{}
	rename = map[string]string{}
	for i, file := range slices.Sorted(maps.Keys(byFile(blank))) {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return "", nil, err
		}
		var these []*Exercise
		for _, e := range blank {
			if e.File == file {
				these = append(these, e)
			}
		}
		out, err := blankKeepingLines(file, src, these)
		if err != nil {
			return "", nil, err
		}
		copyDir := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(copyDir, 0o755); err != nil {
			return "", nil, err
		}
		copyPath := filepath.Join(copyDir, filepath.Base(file))
		if err := os.WriteFile(copyPath, out, 0o644); err != nil {
			return "", nil, err
		}
		original := filepath.Join(root, filepath.FromSlash(file))
		replace[original] = copyPath
		rename[copyPath] = file
	}
	data, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", nil, err
	}
	overlay = filepath.Join(dir, "overlay.json")
	return overlay, rename, os.WriteFile(overlay, data, 0o644)
}

// exercisesNaming lists the exercises that name a test: "exercise 01.2",
// "exercises 01.2, 01.3".
func exercisesNaming(exs []*Exercise, k pkgKey, name string) string {
	var ids []string
	for _, e := range exs {
		if e.Module == k.Module && slices.Contains(e.Tests, TestRef{Pkg: k.Pkg, Name: name}) {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) == 1 {
		return "exercise " + ids[0]
	}
	return "exercises " + strings.Join(ids, ", ")
}

// indentAfterFirst indents every line of s but the first.
func indentAfterFirst(s, indent string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+indent)
}

// tasksPhrase is "32 exercises", or "32 exercises, 9 build tasks and 2
// break tasks".
func tasksPhrase(exs []*Exercise) string {
	n := map[Kind]int{}
	for _, e := range exs {
		n[e.Kind]++
	}
	parts := []string{plural(n[Fill], "exercise")}
	if n[Build] > 0 {
		parts = append(parts, plural(n[Build], "build task"))
	}
	if n[Break] > 0 {
		parts = append(parts, plural(n[Break], "break task"))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// verifyBlank is (b) for one task: its report line and its problems.
func verifyBlank(e *Exercise, root, dir string, opts verifyOptions) (line string, problems []string) {
	if e.Blank {
		return "", nil
	}
	t0 := time.Now()
	overlay, rename, err := writeOverlay(dir, root, []*Exercise{e})
	if err != nil {
		return "", []string{fmt.Sprintf("blanking %s: %v", e.ID, err)}
	}
	var failing, others []string
	var buildErr string
	for _, pkg := range e.Pkgs() {
		if len(failing) > 0 {
			break
		}
		var names []string
		for _, t := range e.Tests {
			if t.Pkg == pkg {
				names = append(names, t.Name)
			}
		}
		g := &goTester{Dir: filepath.Join(root, e.Module), Overlay: overlay, Rename: rename, Timeout: opts.Timeout, Race: opts.Race,
			TestTimeout:  blankTestTimeout, // a blank that hangs a test fails it: no need to wait for go test's -timeout
			FirstFailure: true}             // one failing test is the proof; the rest need not run
		res, err := g.run(pkg, names)
		if err != nil {
			buildErr = err.Error()
			break
		}
		if res.BuildFailed {
			buildErr = res.BuildOutput
			break
		}
		for _, n := range names {
			ref := TestRef{Pkg: pkg, Name: n}.String()
			r := res.Tests[n]
			switch {
			case r.Status != testFail:
				others = append(others, ref+" "+r.Status)
			case timedOut(r.Output) && reachedExercise(r.Output) != e.Kind.String()+" "+e.ID && hangingTask(r.Output, []*Exercise{e}) == nil:
				// A timeout whose dump shows nothing of this task proves
				// nothing: a slow test, not a graded one.
				others = append(others, ref+" timed out elsewhere")
			default:
				failing = append(failing, ref)
			}
		}
	}
	took := time.Since(t0).Round(100 * time.Millisecond)
	switch {
	case buildErr != "":
		return fmt.Sprintf("  %s %s: does not compile (%s)", e.ID, e.Title, took),
			[]string{fmt.Sprintf("blanking %s does not compile (a variable or import the region alone used? move it into the region):\n%s", e.ID, strings.TrimSpace(buildErr))}
	case len(failing) == 0:
		return fmt.Sprintf("  %s %s: no test fails (%s)", e.ID, e.Title, took),
			[]string{fmt.Sprintf("blanking %s fails none of its tests (%s): name a test that needs the region", e.ID, strings.Join(others, ", "))}
	}
	return fmt.Sprintf("  %s %s: %s fails (%s)", e.ID, e.Title, strings.Join(failing, ", "), took), nil
}

// listTests lists the top-level tests of a package (go test -list), which
// compiles its test binary but runs nothing.
func listTests(dir, pkg string) ([]string, error) {
	cmd := exec.Command("go", "test", "-list", ".", pkg)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -list: %v\n%s", err, out)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if testNameRe.MatchString(strings.TrimSpace(l)) {
			names = append(names, strings.TrimSpace(l))
		}
	}
	return names, nil
}
