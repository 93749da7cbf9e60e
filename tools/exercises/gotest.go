package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// What became of a named test in a run of go test.
const (
	testPass    = "pass"
	testFail    = "fail"
	testSkip    = "skip"
	testMissing = "missing" // the package has no such test
	testNotRun  = "not run" // the package did not build, or its runs stopped before the test
)

// testResult is one test's outcome and what it printed.
type testResult struct {
	Status string
	Output []string
}

// pkgResult is what go test said about one package's named tests.
type pkgResult struct {
	Tests       map[string]*testResult // by test name
	BuildFailed bool                   // the package or a dependency did not compile
	BuildOutput string                 // the compiler's messages, when it did not
	Output      []string               // the package's own lines (FAIL, a timeout's report)
	Elapsed     time.Duration
}

// goTester runs go test in one module.
type goTester struct {
	Dir     string        // the module's folder: go runs there
	Overlay string        // an -overlay file, or ""
	Timeout time.Duration // go test's -timeout
	Race    bool          // -race
	// FirstFailure stops at the first test that fails (-failfast, and no
	// second run after a panic): the tests not run are reported so.
	FirstFailure bool
	// Rename maps the paths of overlaid copies back to the files they
	// stand for, in every message shown.
	Rename map[string]string
	// TestTimeout, when set, bounds each top-level test: one that runs
	// longer gets SIGQUIT, so that its goroutines are dumped into its
	// output (to blame the task that hangs) and the tests after it run
	// again without it. A blank task that panics while its caller holds a
	// lock a test's cleanup then waits for would otherwise hang the whole
	// package until go test's -timeout.
	TestTimeout time.Duration
}

// run runs the named tests of pkg ("./record") with go test -json and
// reports each. A test that panics ends its test binary, and the tests
// after it never start: those are run again, without the ones that have a
// result, until each has one. A test the package does not have is missing.
func (g *goTester) run(pkg string, names []string) (*pkgResult, error) {
	start := time.Now()
	res := &pkgResult{Tests: map[string]*testResult{}}
	remaining := slices.Clone(names)
	for len(remaining) > 0 {
		one, err := g.once(pkg, remaining)
		if err != nil {
			return nil, err
		}
		res.Output = append(res.Output, one.Output...)
		if one.BuildFailed {
			res.BuildFailed, res.BuildOutput = true, one.BuildOutput
			for _, n := range remaining {
				res.Tests[n] = &testResult{Status: testNotRun}
			}
			break
		}
		var next []string
		failed := false
		for _, n := range remaining {
			if r, ok := one.Tests[n]; ok {
				res.Tests[n] = r
				failed = failed || r.Status == testFail
			} else {
				next = append(next, n)
			}
		}
		if failed && g.FirstFailure {
			for _, n := range next {
				res.Tests[n] = &testResult{Status: testNotRun}
			}
			break
		}
		if len(next) == len(remaining) || one.passed {
			// Nothing new came back: the package passed without them
			// (they do not exist), or its binary stops before any test.
			status := testMissing
			if !one.passed {
				status = testNotRun
			}
			for _, n := range next {
				res.Tests[n] = &testResult{Status: status}
			}
			break
		}
		remaining = next
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// onceResult is one go test run.
type onceResult struct {
	pkgResult
	passed  bool // the package's own verdict was ok
	started bool // go got as far as building the package for its tests
}

// testEvent is a line of go test -json (cmd/test2json's TestEvent, and the
// build events of Go 1.24 on).
type testEvent struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
}

func (g *goTester) once(pkg string, names []string) (*onceResult, error) {
	args := []string{"test", "-count=1", "-json", "-run", runPattern(names)}
	if g.Timeout > 0 {
		args = append(args, "-timeout", g.Timeout.String())
	}
	if g.Race {
		args = append(args, "-race")
	}
	if g.FirstFailure {
		args = append(args, "-failfast")
	}
	if g.Overlay != "" {
		args = append(args, "-overlay", g.Overlay)
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = g.Dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var runErr error
	if g.TestTimeout > 0 {
		runErr = runWatched(cmd, &stdout, g.TestTimeout)
	} else {
		runErr = cmd.Run()
	}
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		return nil, fmt.Errorf("go %s: %w", strings.Join(args, " "), runErr)
	}
	res := parseTestEvents(stdout.Bytes(), g.rename)
	if runErr == nil {
		res.passed = true
	}
	if res.BuildFailed && res.BuildOutput == "" {
		res.BuildOutput = g.rename(stderr.String())
	}
	if !res.started && !res.BuildFailed {
		// go did not get as far as testing: a package that does not
		// exist, a flag it refused.
		msg := strings.TrimSpace(g.rename(stderr.String() + strings.Join(res.Output, "")))
		return nil, fmt.Errorf("go %s (in %s): %s", strings.Join(args, " "), g.Dir, msg)
	}
	return res, nil
}

// runPattern is go test's -run for exactly these top-level tests.
func runPattern(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return "^(" + strings.Join(quoted, "|") + ")$"
}

func (g *goTester) rename(s string) string {
	for from, to := range g.Rename {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

// parseTestEvents reads go test -json output. A subtest's lines count as
// its top-level test's. A test still running when the output ends was
// killed with its binary (a panic on another goroutine, a timeout): it
// failed.
func parseTestEvents(out []byte, rename func(string) string) *onceResult {
	res := &onceResult{}
	res.Tests = map[string]*testResult{}
	running := map[string]bool{}
	var build strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev testEvent
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			res.Output = append(res.Output, rename(string(line))+"\n")
			continue
		}
		switch ev.Action {
		case "build-output":
			build.WriteString(rename(ev.Output))
			continue
		case "build-fail":
			res.BuildFailed, res.started = true, true
			continue
		case "start":
			res.started = true
		}
		if ev.Test == "" {
			if ev.Action == "output" {
				res.Output = append(res.Output, rename(ev.Output))
			}
			if ev.Action == "fail" && ev.FailedBuild != "" {
				res.BuildFailed = true
			}
			continue
		}
		top, _, sub := strings.Cut(ev.Test, "/")
		r := res.Tests[top]
		if r == nil {
			r = &testResult{}
			res.Tests[top] = r
		}
		switch ev.Action {
		case "output":
			r.Output = append(r.Output, rename(ev.Output))
		case "run":
			if !sub {
				running[top] = true
			}
		case "pass", "fail", "skip":
			if !sub {
				r.Status = ev.Action
				delete(running, top)
			}
		}
	}
	for name, r := range res.Tests {
		if r.Status == "" {
			if running[name] {
				r.Status = testFail
			} else {
				delete(res.Tests, name)
			}
		}
	}
	res.BuildOutput = build.String()
	return res
}

var exercisePanic = regexp.MustCompile(`panic: ((?:exercise|build) \d\d\.(?:\d+|[A-Z])): `)

// reachedExercise is the task whose panic a test's output shows ("exercise
// 01.2", "build 01.A"), or "".
func reachedExercise(output []string) string {
	for _, l := range output {
		if m := exercisePanic.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	return ""
}

// excerpt is the part of a failed test's output worth showing a learner:
// its messages without the run bookkeeping, cut after max lines.
func excerpt(output []string, max int) []string {
	var lines []string
	for _, chunk := range output {
		for _, l := range strings.Split(strings.TrimRight(chunk, "\n"), "\n") {
			t := strings.TrimSpace(l)
			if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
				continue
			}
			if strings.HasPrefix(t, "goroutine ") && strings.HasSuffix(t, ":") {
				lines = append(lines, "...")
				return lines
			}
			if len(lines) == max {
				return append(lines, "...")
			}
			lines = append(lines, strings.TrimPrefix(strings.TrimRight(l, " \t"), "    ")) // go test indents a test's log
		}
	}
	return lines
}
