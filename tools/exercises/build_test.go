package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// calcBuild is calcGood with a build task around Twice and Half: the
// build track blanks their bodies, and exercise 01.1 outside it.
var calcBuild = calcGood[:strings.Index(calcGood, "// Twice doubles x.")] + `// build 01.A: double and halve
// tests: TestTwice, TestHalf

// Twice doubles x.
func Twice(x int) int {
	// exercise 01.2: double it
	// hint: add it to itself
	// tests: TestTwice
	return x + x
	// end exercise
}

// Half halves x, rounding toward zero.
func Half(x int) int { return x / 2 }

// end build
`

func TestBuildTrackBlanksWholeFunctionsAndTheExercisesOutside(t *testing.T) {
	t.Parallel()
	root := demoWorkbook(t, calcBuild)
	var out bytes.Buffer
	require.NoError(t, verify(&out, root, nil, quick), out.String())
	require.Contains(t, out.String(), "01.A double and halve: ./calc.TestTwice fails")
	require.Contains(t, out.String(), "stage 01 (stage01-demo), build track: 2 tasks blanked, every package compiles")

	dir := filepath.Join(t.TempDir(), "learner")
	out.Reset()
	require.NoError(t, write(&out, root, dir, nil, writeOptions{Track: TrackBuild}))
	require.Contains(t, out.String(), "blanked 2 tasks")
	calc := readFile(t, filepath.Join(dir, "stage01-demo/calc/calc.go"))
	require.Contains(t, calc, "// Twice doubles x.\nfunc Twice(x int) int {\n\tpanic(\"build 01.A: double and halve (see docs/01-demo.md, Build it)\")\n}",
		"the signature and doc comment stay, the body is the task's panic")
	require.Contains(t, calc, "func Half(x int) int { panic(\"build 01.A:")
	require.NotContains(t, calc, "exercise 01.2", "an exercise inside a build task goes with its function's body")
	require.Contains(t, calc, `panic("exercise 01.1: add up a list`, "an exercise outside the build tasks is blanked too")
	require.Contains(t, readFile(t, filepath.Join(dir, solutionsDir, "01.A.txt")), "func Half(x int) int { return x / 2 }")

	opts := checkOptions{Timeout: 2 * quick.Timeout, Gate: true}
	out.Reset()
	require.ErrorIs(t, check(&out, dir, nil, opts), errReported)
	require.Contains(t, out.String(), "the build track")
	require.Regexp(t, `01.A  double and halve  blank, build  FAIL`, out.String())
	require.NotContains(t, out.String(), "01.2 ", "the build track does not grade the exercise it swallowed")

	// The learner writes both tasks, in a file of their own making: a
	// helper function inside the build task, and an import.
	written := strings.Replace(calc, "func Twice(x int) int {\n\tpanic(\"build 01.A: double and halve (see docs/01-demo.md, Build it)\")\n}",
		"func Twice(x int) int { return times(x, 2) }\n\nfunc times(x, n int) int { return x * n }", 1)
	partial := written
	written = strings.Replace(written, `func Half(x int) int { panic("build 01.A: double and halve (see docs/01-demo.md, Build it)") }`,
		"func Half(x int) int { return int(math.Trunc(float64(x) / 2)) }", 1)
	written = strings.Replace(written, `panic("exercise 01.1: add up a list (see docs/01-log.md, Your turn)")`, "", 1)
	i := strings.Index(written, `panic("exercise 01.1`)
	require.Positive(t, i)
	j := i + strings.Index(written[i:], "\n")
	written = written[:i] + "return Twice(0) + len(strings.Split(list, \",\")) - len(strings.Split(list, \",\")) + 6" + written[j:]
	written = strings.Replace(written, "package calc\n", "package calc\n\nimport (\n\t\"math\"\n\t\"strings\"\n)\n", 1)
	partial = strings.Replace(partial, "package calc\n", "package calc\n\nimport \"strings\"\n", 1)
	i = strings.Index(partial, `panic("exercise 01.1`)
	j = i + strings.Index(partial[i:], "\n")
	partial = partial[:i] + "return Twice(0) + len(strings.Split(list, \",\")) - len(strings.Split(list, \",\")) + 6" + partial[j:]
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stage01-demo/calc/calc.go"), []byte(partial), 0o644))
	out.Reset()
	require.ErrorIs(t, check(&out, dir, nil, checkOptions{Timeout: quick.Timeout, IDs: []string{"01.A"}}), errReported)
	require.Contains(t, out.String(), "1 of 3 functions are still the task's panic", "a build task half written does not pass (the learner's helper counts as one of its functions)")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "stage01-demo/calc/calc.go"), []byte(written), 0o644))
	out.Reset()
	require.NoError(t, check(&out, dir, nil, opts), out.String())
	require.Contains(t, out.String(), "stage 01: 2 of 2 tasks pass")
	require.Contains(t, out.String(), "stage gate passed: stage01-demo is done", "once a stage's tasks pass, its whole module's tests run")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "stage01-demo/calc/extra.go"), []byte("package calc\n\nfunc extra() {}\n"), 0o644))

	// A new copy brings that work along: the learner's code, its helper
	// and the import it needs; a file of the learner's own is named.
	next := filepath.Join(t.TempDir(), "next")
	out.Reset()
	require.NoError(t, write(&out, root, next, nil, writeOptions{Track: TrackBuild, From: dir}))
	require.Contains(t, out.String(), "carried forward from "+dir+": 01.1, 01.A")
	require.Contains(t, out.String(), "not carried: stage01-demo/calc/extra.go, changed outside any task's region")
	require.NotContains(t, out.String(), "not carried: stage01-demo/calc/calc.go", "calc.go changed only inside its tasks' regions")
	carried := readFile(t, filepath.Join(next, "stage01-demo/calc/calc.go"))
	require.Contains(t, carried, "func times(x, n int) int { return x * n }")
	require.Contains(t, carried, `"math"`)
	out.Reset()
	require.NoError(t, check(&out, next, nil, checkOptions{Timeout: quick.Timeout}), out.String())
	log, err := exec.Command("git", "-C", next, "log", "--format=%s").Output()
	require.NoError(t, err)
	require.Equal(t, "carried forward from "+dir+": 01.1, 01.A\nbaseline: the workbook with 2 tasks blanked (build track)\n", string(log))
	require.ErrorContains(t, write(&out, root, filepath.Join(t.TempDir(), "x"), nil, writeOptions{From: root}), "not a learner's copy")
}

func TestHintsComeByLevelAndSolutionsFromTheCopy(t *testing.T) {
	t.Parallel()
	root := demoWorkbook(t, calcBuild)
	writeFiles(t, root, map[string]string{"docs/hints/01.md": `# Hints for stage 01

## 01.1: add up a list

### Hint 1

Split first.

### Hint 2

Then convert each
piece.

### Hint 3

A loop with strconv.Atoi.

## 01.A: double and halve

### Hint 1

Arithmetic.
`})
	var out bytes.Buffer
	require.NoError(t, hint(&out, root, "01.1", 2))
	require.Contains(t, out.String(), "hint 1 of 3:\n  Split first.\n")
	require.Contains(t, out.String(), "hint 2 of 3:\n  Then convert each\n  piece.\n")
	require.NotContains(t, out.String(), "strconv.Atoi")
	require.Contains(t, out.String(), "more: make hint EX=01.1 LEVEL=3")
	out.Reset()
	require.NoError(t, hint(&out, root, "01.2", 3), "no file entry: the marker's hint")
	require.Contains(t, out.String(), "hint 1 of 1:\n  add it to itself")
	require.Contains(t, out.String(), "make solution EX=01.2")
	require.ErrorContains(t, hint(&out, root, "01.9", 1), "no task 01.9")

	out.Reset()
	require.NoError(t, solution(&out, root, "01.A"))
	require.Contains(t, out.String(), "func Half(x int) int { return x / 2 }")
}

func TestATimeoutIsBlamedOnTheTaskThatHangs(t *testing.T) {
	tasks := []*Exercise{
		{Kind: Fill, ID: "01.3", File: "stage01-log/commitlog/index.go", Line: 120, End: 140},
		{Kind: Build, ID: "01.I", File: "stage01-log/commitlog/segment.go", Line: 39, End: 700},
	}
	dump := []string{
		"panic: test timed out after 2m0s\n\trunning tests:\n\t\tTestRead (2m0s)\n\n",
		"goroutine 7 [running]:\ntesting.(*M).startAlarm.func1()\n\t/usr/local/go/src/testing/testing.go:2484 +0x394\n",
		"goroutine 21 [runnable]:\ngithub.com/x/commitlog.(*segment).translateOffset(...)\n\t/home/me/workbook/stage01-log/commitlog/segment.go:431 +0x1d\n",
	}
	sigquit := []string{"SIGQUIT: quit\nPC=0x47d0a1 m=0 sigcode=0\n\n",
		"goroutine 21 gp=0xc000102a80 m=nil [sync.Mutex.Lock]:\ngithub.com/x/commitlog.(*mmapIndex).search(...)\n\t/home/me/workbook/stage01-log/commitlog/index.go:133 +0x37 fp=0xc00004df28 sp=0xc00004df00 pc=0x4a7b37\n"}
	require.True(t, timedOut(sigquit))
	h0 := hangingTask(sigquit, tasks)
	require.NotNil(t, h0, "a SIGQUIT dump's frames carry fp= sp= pc=")
	require.Equal(t, "01.3", h0.task.ID)
	require.True(t, timedOut(dump))
	h := hangingTask(dump, tasks)
	require.NotNil(t, h)
	require.Equal(t, "01.I", h.task.ID)
	require.Equal(t, "stage01-log/commitlog/segment.go:431", h.where)
	require.Nil(t, hangingTask(dump[:2], tasks))
	require.True(t, timedOut([]string{"SIGQUIT: quit\n", "PC=0x47d0a1 m=0 sigcode=0\n"}), "a test stopped past -test-timeout")
}

func TestStatsCountsTheLinesEachTrackWrites(t *testing.T) {
	t.Parallel()
	root := demoWorkbook(t, calcBuild)
	var out bytes.Buffer
	require.NoError(t, stats(&out, root, nil))
	// The fill track writes 01.1's 6 lines and 01.2's 1; the build track
	// 01.1's and the bodies of Twice and Half, 1 line each.
	require.Regexp(t, `stage01-demo\s+17\s+7 \(41.2%\)\s+8 \(47.1%\)`, out.String())
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

func TestABreakTaskRunsItsTestsWithTheVariantInPlace(t *testing.T) {
	t.Parallel()
	calc := calcGood + `
// Half halves x.
func Half(x int) int {
	// break 01.b1: halve by shifting too far
	// predict: which test fails, and what does Half(4) return?
	// tests: TestHalf
	return x / 2
	// broken:
	// y := x >> 2
	// return y
	// end break
}
`
	root := demoWorkbook(t, calc)
	var out bytes.Buffer
	require.NoError(t, verify(&out, root, nil, quick), out.String())
	require.Contains(t, out.String(), "01.b1 halve by shifting too far: ./calc.TestHalf fails")
	require.Contains(t, out.String(), "2 exercises and 1 break task")

	out.Reset()
	require.NoError(t, breakIt(&out, root, "01.b1", false, checkOptions{}))
	require.Contains(t, out.String(), "  - return x / 2\n  + y := x >> 2\n  + return y\n")
	require.Contains(t, out.String(), "predict: which test fails, and what does Half(4) return?")
	require.NotContains(t, out.String(), "running them")

	out.Reset()
	require.NoError(t, breakIt(&out, root, "01.b1", true, checkOptions{Timeout: quick.Timeout}))
	require.Contains(t, out.String(), "FAIL TestHalf")
	require.Contains(t, out.String(), "Half(4) = 1, want 2")
	require.Contains(t, out.String(), "with the variant in place, 1 of 1 tests fail")
	require.Equal(t, calc, readFile(t, filepath.Join(root, "stage01-demo/calc/calc.go")), "the tree is unchanged")

	out.Reset()
	require.NoError(t, write(&out, root, filepath.Join(t.TempDir(), "c"), nil, writeOptions{NoGit: true}))
	require.Contains(t, out.String(), "blanked 2 tasks", "no track blanks a break task")
}
