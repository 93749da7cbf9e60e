// Command exercises turns the workbook's reference into a learner's
// workbook and grades it. A learner's task is a marked region of the
// reference (see Exercise); a learner's copy has each region of the chosen
// stages replaced by a panic, and the stage's own tests, named by the
// marker, grade what the learner writes there. There is one source: the
// copy is generated, never kept, so it cannot drift from the reference.
//
//	exercises list     [-stages 01,02] [-track build]      every task: id, title, place, tests
//	exercises write    -dir DIR [-stages 01,02] [-track build] [-from OLD]
//	                                                      a learner's copy, those stages blanked
//	exercises check    [-stage 01] [-ex 01.3]             which tasks pass, in a copy or the reference
//	exercises hint     -ex 01.3 [-level 2]                the task's hints, up to a level
//	exercises solution -ex 01.3                           the reference's code for a task
//	exercises stats    [-stages 01,02]                    per stage, the lines a learner writes on each track
//	exercises verify   [-stages 01,02]                    CI: every task is graded by a test that fails when it is blank
//
// Run it from anywhere inside the workbook: it works on the workspace
// (the folder with go.work) above the current directory.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

const usage = `usage: go run ./tools/exercises <command> [flags]

  list     [-stages 01,02] [-track fill|build]   every task: id, title, file:line, tests
  write    -dir DIR [-stages 01,02] [-track fill|build] [-from OLD]
                                                 copy the workbook to DIR with the tasks of those stages blanked (default: all),
                                                 bringing along what the learner wrote in an earlier copy OLD
  check    [-stage 01] [-ex 01.3] [-v]           run each task's tests and show which pass (default: every stage)
  hint     -ex 01.3 [-level 1|2|3]               a task's hints, up to the level (docs/hints/)
  solution -ex 01.3                              the reference's code for a task
  break    -ex 04.b1 [-run]                      a break-it task: predict, then run its tests with the broken variant
  stats    [-stages 01,02]                       per stage, the lines a learner writes on each track
  verify   [-stages 01,02]                       for CI, on the reference: tests pass; blanking each task fails one; blanked stages compile

Tasks are fill-in exercises (01.3: statements of a function) and build tasks
(01.A: whole functions); the fill track blanks exercises, the build track
build tasks and the exercises outside them.

Run "go run ./tools/exercises <command> -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command with its arguments; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("exercises "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var stages, stage, dir, track, from, ex string
	var timeout, testTimeout time.Duration
	var race, verbose, noGit, gate, runIt, listRef bool
	var level int
	switch cmd {
	case "list":
		fs.StringVar(&stages, "stages", "", "only these stages, comma-separated (01,02)")
		fs.StringVar(&track, "track", "", "only the tasks of this track: fill or build (default: every task)")
	case "write":
		fs.StringVar(&dir, "dir", "", "the learner's copy to write: a folder that does not exist or is empty")
		fs.StringVar(&stages, "stages", "", "blank the tasks of these stages, comma-separated (default: every stage)")
		fs.StringVar(&track, "track", TrackFill, "fill (fill-in exercises) or build (whole functions: the build tasks, and the exercises outside them)")
		fs.StringVar(&from, "from", "", "an earlier learner's copy: what you wrote there comes along")
		fs.BoolVar(&noGit, "no-git", false, "do not make the copy a git repository with a baseline commit")
	case "hint":
		fs.StringVar(&ex, "ex", "", "the task: 01.3, 01.A")
		fs.IntVar(&level, "level", 1, "show hints 1 up to this level (3 is nearly the answer)")
	case "solution":
		fs.StringVar(&ex, "ex", "", "the task: 01.3, 01.A")
	case "break":
		fs.StringVar(&ex, "ex", "", "the break task: 04.b1")
		fs.BoolVar(&runIt, "run", false, "run its tests with the variant in place (predict first)")
		fs.DurationVar(&testTimeout, "test-timeout", 2*time.Minute, "one test's bound")
	case "stats":
		fs.StringVar(&stages, "stages", "", "only these stages, comma-separated (default: every stage)")
	case "check":
		fs.StringVar(&stage, "stage", "", "only this stage's tasks (default: every stage)")
		fs.StringVar(&ex, "ex", "", "only this task (01.3, 01.A)")
		fs.StringVar(&track, "track", "", "the track to grade: fill or build (default: the copy's, fill in the reference)")
		fs.BoolVar(&gate, "gate", true, "in a learner's copy, once a stage's tasks all pass, run its whole module's tests and the next stage's")
		fs.DurationVar(&timeout, "timeout", 20*time.Minute, "go test's -timeout for each package's run")
		fs.DurationVar(&testTimeout, "test-timeout", 2*time.Minute, "one test's bound: a test that runs longer has its goroutines dumped, to name the task that hangs (0: only -timeout)")
		fs.BoolVar(&race, "race", false, "run the tests with the race detector (default: on for stages "+strings.Join(raceStages, ", ")+", where the code is concurrent)")
		fs.BoolVar(&verbose, "v", false, "show every failing test's output in full, not an excerpt")
	case "verify":
		fs.StringVar(&stages, "stages", "", "only these stages, comma-separated (default: every stage)")
		fs.BoolVar(&listRef, "list-reference", false, "check that the named tests exist without running them on the reference (make test runs every stage's tests anyway)")
		fs.DurationVar(&timeout, "timeout", 10*time.Minute, "go test's -timeout for each package")
		fs.BoolVar(&race, "race", false, "run the tests with the race detector")
	default:
		fmt.Fprintf(stderr, "exercises: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	raceSet := false
	fs.Visit(func(f *flag.Flag) { raceSet = raceSet || f.Name == "race" })
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "exercises %s: unexpected arguments %q\n", cmd, fs.Args())
		return 2
	}
	if stage != "" {
		stages = stage
	}
	chosen, err := parseStages(stages)
	if err == nil && stage != "" && len(chosen) != 1 {
		err = fmt.Errorf("-stage takes one stage, got %q", stage)
	}
	if err != nil {
		fmt.Fprintf(stderr, "exercises %s: %v\n", cmd, err)
		return 2
	}
	root, err := workspaceRoot()
	if err != nil {
		fmt.Fprintf(stderr, "exercises: %v\n", err)
		return 1
	}
	if (cmd == "hint" || cmd == "solution" || cmd == "break") && ex == "" {
		fmt.Fprintf(stderr, "exercises %s: -ex is required (go run ./tools/exercises list shows the tasks)\n", cmd)
		return 2
	}
	if ex != "" && !taskIDRe.MatchString(ex) {
		fmt.Fprintf(stderr, "exercises %s: -ex %q: want a task id such as 01.3 or 01.A\n", cmd, ex)
		return 2
	}
	switch cmd {
	case "list":
		err = list(stdout, root, chosen, track)
	case "write":
		if dir == "" {
			fmt.Fprintf(stderr, "exercises write: -dir is required\n")
			return 2
		}
		err = write(stdout, root, dir, chosen, writeOptions{Track: track, From: from, NoGit: noGit})
	case "hint":
		err = hint(stdout, root, ex, level)
	case "solution":
		err = solution(stdout, root, ex)
	case "break":
		err = breakIt(stdout, root, ex, runIt, checkOptions{Timeout: 20 * time.Minute, TestTimeout: testTimeout})
	case "stats":
		err = stats(stdout, root, chosen)
	case "check":
		var ids []string
		if ex != "" {
			ids = []string{ex}
			chosen = []string{ex[:2]}
		}
		err = check(stdout, root, chosen, checkOptions{Timeout: timeout, TestTimeout: testTimeout, Race: race, RaceSet: raceSet, Verbose: verbose,
			Track: track, IDs: ids, Gate: gate})
	case "verify":
		err = verify(stdout, root, chosen, verifyOptions{Timeout: timeout, Race: race, ListReference: listRef})
	}
	if err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintf(stderr, "exercises %s: %v\n", cmd, err)
		}
		return 1
	}
	return 0
}

// errReported is a failure the command has already explained on stdout.
var errReported = errors.New("failures reported above")

// workspaceRoot is the nearest folder holding go.work, from the current
// directory up.
func workspaceRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work in %s or above: run this inside the workbook", dir)
		}
	}
}

// taskIDRe is a task's id: 01.3, 01.A.
var taskIDRe = regexp.MustCompile(`^\d\d\.([1-9]\d*|[A-Z]|b[1-9]\d*)$`)

// list prints every task of the stages, or those of one track.
func list(w io.Writer, root string, stages []string, track string) error {
	exs, err := findExercises(root, stages)
	if err != nil {
		return err
	}
	if track != "" {
		if track, err = parseTrack(track); err != nil {
			return err
		}
		exs = forTrack(exs, track)
	}
	if len(exs) == 0 {
		fmt.Fprintln(w, "no exercises marked"+stagesPhrase(stages))
		return nil
	}
	for _, e := range exs {
		state := ""
		if e.Blank {
			state = "  [blank]"
		}
		kind := ""
		if e.Kind == Build {
			kind = "  (build: " + plural(len(e.funcs), "function") + ")"
		}
		if e.Kind == Break {
			kind = "  (break it)"
		}
		fmt.Fprintf(w, "%s  %s%s%s\n", e.ID, e.Title, kind, state)
		fmt.Fprintf(w, "      %s\n", e.Where())
		var tests []string
		for _, t := range e.Tests {
			tests = append(tests, t.String())
		}
		fmt.Fprintf(w, "      tests: %s (in %s)\n", strings.Join(tests, ", "), e.Module)
	}
	return nil
}

// stagesPhrase is " in stages 01, 02", or "" for every stage.
func stagesPhrase(stages []string) string {
	switch len(stages) {
	case 0:
		return ""
	case 1:
		return " in stage " + stages[0]
	}
	return " in stages " + strings.Join(stages, ", ")
}
