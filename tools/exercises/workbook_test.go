package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests run the commands on a tiny workbook in a temp folder: a
// go.work and a stage 01 module of one package, calc, whose tests need
// nothing but the standard library, so go builds them offline in seconds.

const calcGood = `package calc

import (
	"strconv"
	"strings"
)

// Sum adds the numbers of a comma-separated list.
func Sum(list string) int {
	// exercise 01.1: add up a list
	// hint: strings.Split, then strconv.Atoi
	// tests: TestSum, TestNothing
	total := 0
	for _, f := range strings.Split(list, ",") {
		n, _ := strconv.Atoi(f)
		total += n
	}
	return total
	// end exercise
}

// Twice doubles x.
func Twice(x int) int {
	// exercise 01.2: double it
	// hint: add it to itself
	// tests: TestTwice
	return x + x
	// end exercise
}
`

const calcTests = `package calc

import "testing"

func TestSum(t *testing.T) {
	if got := Sum("1,2,3"); got != 6 {
		t.Fatalf("Sum(1,2,3) = %d, want 6", got)
	}
}

func TestTwice(t *testing.T) {
	if got := Twice(2); got != 4 {
		t.Fatalf("Twice(2) = %d, want 4", got)
	}
}

func TestHalf(t *testing.T) {
	if got := Half(4); got != 2 {
		t.Fatalf("Half(4) = %d, want 2", got)
	}
}

func TestNothing(t *testing.T) {}

func TestOther(t *testing.T) {}
`

// demoWorkbook writes the tiny workbook with calc.go as given and returns
// its root.
func demoWorkbook(t *testing.T, calc string) string {
	t.Helper()
	root := t.TempDir()
	if !strings.Contains(calc, "func Half") {
		calc += "\nfunc Half(x int) int { return x / 2 }\n"
	}
	writeFiles(t, root, map[string]string{
		"go.work":                        "go 1.26.0\n\nuse ./stage01-demo\n",
		"stage01-demo/go.mod":            "module example.com/demo\n\ngo 1.26.0\n",
		"stage01-demo/calc/calc.go":      calc,
		"stage01-demo/calc/calc_test.go": calcTests,
		"docs/01-demo.md":                "# Chapter 1\n",
		"README.md":                      "the demo\n",
		".git/config":                    "not a repository: write falls back to walking the tree\n",
	})
	require.NoError(t, os.Chmod(filepath.Join(root, "README.md"), 0o600))
	return root
}

var quick = verifyOptions{Timeout: 2 * time.Minute}

func TestVerifyPassesAWellMarkedWorkbook(t *testing.T) {
	t.Parallel()
	root := demoWorkbook(t, calcGood)
	var out bytes.Buffer
	require.NoError(t, verify(&out, root, nil, quick), out.String())
	require.Contains(t, out.String(), "01.1 add up a list: ./calc.TestSum fails")
	require.Contains(t, out.String(), "01.2 double it: ./calc.TestTwice fails")
	require.Contains(t, out.String(), "stage 01 (stage01-demo), fill track: 2 tasks blanked, every package compiles")
	require.Contains(t, out.String(), "verify: 2 exercises: all pass on the reference")
}

func TestVerifyNamesEachProblem(t *testing.T) {
	t.Parallel()
	calc := strings.Replace(calcGood, "// tests: TestTwice", "// tests: TestOther", 1) + `
// Half halves x.
func Half(x int) int {
	y := x
	// exercise 01.3: halve it
	// hint: divide
	// tests: TestHalf, TestMissing
	return y / 2
	// end exercise
}
`
	root := demoWorkbook(t, calc)
	var out bytes.Buffer
	err := verify(&out, root, []string{"01"}, quick)
	require.ErrorIs(t, err, errReported)
	report := out.String()
	require.Contains(t, report, "exercise 01.3 names TestMissing, which stage01-demo ./calc does not have")
	require.Contains(t, report, "blanking 01.2 fails none of its tests (./calc.TestOther pass)")
	require.Contains(t, report, "blanking 01.3 does not compile")
	require.Contains(t, report, "stage01-demo/calc/calc.go:33:2: declared and not used: y", "the message names the reference's file and line, not the overlay copy's")
	require.Contains(t, report, "with every task of stage 01's fill track blanked, stage01-demo does not compile")
	require.Contains(t, report, "verify: 4 problems with 3 exercises")
	source, err := os.ReadFile(filepath.Join(root, "stage01-demo/calc/calc.go"))
	require.NoError(t, err)
	require.Equal(t, calc, string(source), "verify changes nothing in the tree")
}

func TestWriteThenCheckFollowsALearner(t *testing.T) {
	t.Parallel()
	root := demoWorkbook(t, calcGood)
	dir := filepath.Join(t.TempDir(), "learner")
	var out bytes.Buffer
	require.NoError(t, write(&out, root, dir, []string{"01"}, writeOptions{}))
	require.Contains(t, out.String(), "blanked 2 tasks in stage 01")
	require.Contains(t, out.String(), "next: cd "+dir+" && make check STAGE=01")

	// Everything is copied but .git; the exercises are blank, the rest is as it was.
	for _, f := range []string{"go.work", "stage01-demo/go.mod", "stage01-demo/calc/calc_test.go", "docs/01-demo.md", "README.md"} {
		want, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err, f)
		require.Equal(t, want, got, f)
	}
	fi, err := os.Stat(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "modes are kept")
	log, err := exec.Command("git", "-C", dir, "log", "--format=%s").Output()
	require.NoError(t, err, "the copy is a git repository")
	require.Equal(t, "baseline: the workbook with 2 tasks blanked (fill track)\n", string(log))
	calc, err := os.ReadFile(filepath.Join(dir, "stage01-demo/calc/calc.go"))
	require.NoError(t, err)
	require.Contains(t, string(calc), `panic("exercise 01.1: add up a list (see docs/01-demo.md, Your turn)")`)
	require.NotContains(t, string(calc), `"strconv"`)
	var m manifest
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	require.Equal(t, manifest{Track: TrackFill, Stages: []string{"01"}, Exercises: []string{"01.1", "01.2"}}, m)
	solution, err := os.ReadFile(filepath.Join(dir, solutionsDir, "01.2.txt"))
	require.NoError(t, err)
	require.Contains(t, string(solution), "\treturn x + x\n", "the copy keeps the reference's code for make solution")

	require.ErrorContains(t, write(&out, root, dir, nil, writeOptions{}), "is not empty")
	require.ErrorContains(t, write(&out, root, filepath.Join(root, "inside"), nil, writeOptions{}), "is inside the workbook")

	opts := checkOptions{Timeout: 2 * time.Minute}
	out.Reset()
	require.ErrorIs(t, check(&out, dir, []string{"01"}, opts), errReported)
	require.Contains(t, out.String(), "stage 01: 0 of 2 tasks pass")
	require.Regexp(t, `01.1  add up a list  blank    FAIL\n.*\n\s+FAIL TestSum\n\s+ok   TestNothing\n\s+hint: strings.Split, then strconv.Atoi`, out.String(),
		"a test after the one that panicked still runs")

	// The learner writes 01.2, wrongly first.
	learnerWrites(t, dir, "return x + 1")
	out.Reset()
	require.ErrorIs(t, check(&out, dir, nil, opts), errReported)
	require.Regexp(t, `01.2  double it      written  FAIL`, out.String())
	require.Contains(t, out.String(), "| calc_test.go:13: Twice(2) = 3, want 4")
	require.Contains(t, out.String(), "run:  cd stage01-demo && go test -count=1 -run '^(TestTwice)$' ./calc")

	learnerWrites(t, dir, "return 2 * x")
	out.Reset()
	require.ErrorIs(t, check(&out, dir, nil, opts), errReported)
	require.Regexp(t, `01.2  double it      written  pass`, out.String())
	require.Contains(t, out.String(), "stage 01: 1 of 2 tasks pass")

	out.Reset()
	require.NoError(t, check(&out, root, nil, opts), "the reference passes")
	require.Contains(t, out.String(), "stage 01: 2 of 2 tasks pass")
}

// learnerWrites replaces the region of exercise 01.2 in a learner's copy.
func learnerWrites(t *testing.T, dir, code string) {
	t.Helper()
	path := filepath.Join(dir, "stage01-demo/calc/calc.go")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	exs, err := parseExercises("stage01-demo/calc/calc.go", "stage01-demo", src)
	require.NoError(t, err)
	lines := strings.Split(string(src), "\n")
	e := exs[1]
	lines = append(lines[:e.codeFrom-1], append([]string{"\t" + code}, lines[e.End-1:]...)...)
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))
}

func TestRunRefusesBadArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 2, run([]string{"frobnicate"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), `unknown command "frobnicate"`)
	stderr.Reset()
	require.Equal(t, 2, run([]string{"write"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "-dir is required")
	stderr.Reset()
	require.Equal(t, 2, run([]string{"check", "-stage", "01,02"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "-stage takes one stage")
}
