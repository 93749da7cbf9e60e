// Command exercises turns the workbook's reference into a learner's
// workbook and grades it. A learner's task is a marked region of the
// reference (see Exercise); a learner's copy has each region of the chosen
// stages replaced by a panic, and the stage's own tests, named by the
// marker, grade what the learner writes there. There is one source: the
// copy is generated, never kept, so it cannot drift from the reference.
//
//	exercises list   [-stages 01,02]           every exercise: id, title, place, tests
//	exercises write  -dir DIR [-stages 01,02]  a learner's copy, those stages blanked
//	exercises check  [-stage 01]               which exercises pass, in a copy or the reference
//	exercises verify [-stages 01,02]           CI: every exercise is graded by a test that fails when it is blank
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
	"strings"
	"time"
)

const usage = `usage: go run ./tools/exercises <command> [flags]

  list   [-stages 01,02]           every exercise: id, title, file:line, tests
  write  -dir DIR [-stages 01,02]  copy the workbook to DIR with the exercises of those stages blanked (default: all)
  check  [-stage 01] [-v]          run each exercise's tests and show which pass (default: every stage)
  verify [-stages 01,02]           for CI, on the reference: tests pass; blanking each exercise fails one; blanked stages compile

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
	var stages, stage, dir string
	var timeout time.Duration
	var race, verbose bool
	switch cmd {
	case "list":
		fs.StringVar(&stages, "stages", "", "only these stages, comma-separated (01,02)")
	case "write":
		fs.StringVar(&dir, "dir", "", "the learner's copy to write: a folder that does not exist or is empty")
		fs.StringVar(&stages, "stages", "", "blank the exercises of these stages, comma-separated (default: every stage)")
	case "check":
		fs.StringVar(&stage, "stage", "", "only this stage's exercises (default: every stage)")
		fs.DurationVar(&timeout, "timeout", 2*time.Minute, "go test's -timeout for each package (a wrong exercise can hang a test: a timing wheel that never fires, a lock a recovered panic never released)")
		fs.BoolVar(&race, "race", false, "run the tests with the race detector")
		fs.BoolVar(&verbose, "v", false, "show every failing test's output in full, not an excerpt")
	case "verify":
		fs.StringVar(&stages, "stages", "", "only these stages, comma-separated (default: every stage)")
		fs.DurationVar(&timeout, "timeout", 10*time.Minute, "go test's -timeout for each package")
		fs.BoolVar(&race, "race", false, "run the tests with the race detector")
	default:
		fmt.Fprintf(stderr, "exercises: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
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
	switch cmd {
	case "list":
		err = list(stdout, root, chosen)
	case "write":
		if dir == "" {
			fmt.Fprintf(stderr, "exercises write: -dir is required\n")
			return 2
		}
		err = write(stdout, root, dir, chosen)
	case "check":
		err = check(stdout, root, chosen, checkOptions{Timeout: timeout, Race: race, Verbose: verbose})
	case "verify":
		err = verify(stdout, root, chosen, verifyOptions{Timeout: timeout, Race: race})
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

// list prints every exercise of the stages.
func list(w io.Writer, root string, stages []string) error {
	exs, err := findExercises(root, stages)
	if err != nil {
		return err
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
		fmt.Fprintf(w, "%s  %s%s\n", e.ID, e.Title, state)
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
