package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goodFile holds two exercises, one naming another package's test.
const goodFile = `package commitlog

import "sort"

func find(xs []int, x int) int {
	// exercise 01.2: find the segment that holds an offset
	// hint: the segments are sorted; sort.Search finds the last one at or below it
	// tests: TestReadFindsTheRightSegment, TestReadAcrossSegments
	i := sort.SearchInts(xs, x+1) - 1
	return i
	// end exercise
}

func twice(x int) int {
	if x > 0 {
		// exercise 01.10: double it
		// tests: ./cluster.TestX, TestTwice
		// hint: add it to itself
		return x + x
		// end exercise
	}
	return 0
}
`

func TestParseReadsEachExercise(t *testing.T) {
	exs, err := parseExercises("stage01-log/commitlog/find.go", "stage01-log", []byte(goodFile))
	require.NoError(t, err)
	require.Len(t, exs, 2)

	e := exs[0]
	require.Equal(t, "01.2", e.ID)
	require.Equal(t, "01", e.Stage)
	require.Equal(t, "find the segment that holds an offset", e.Title)
	require.Equal(t, "the segments are sorted; sort.Search finds the last one at or below it", e.Hint)
	require.Equal(t, []TestRef{{"./commitlog", "TestReadFindsTheRightSegment"}, {"./commitlog", "TestReadAcrossSegments"}}, e.Tests)
	require.Equal(t, "stage01-log/commitlog/find.go:6", e.Where())
	require.Equal(t, 11, e.End)
	require.Equal(t, 9, e.codeFrom)
	require.Equal(t, "\t", e.indent)
	require.False(t, e.Blank)

	e = exs[1]
	require.Equal(t, "01.10", e.ID)
	require.Equal(t, "add it to itself", e.Hint, "the tests line may come before the hint")
	require.Equal(t, []TestRef{{"./cluster", "TestX"}, {"./commitlog", "TestTwice"}}, e.Tests)
	require.Equal(t, "\t\t", e.indent)
	require.Equal(t, []string{"./cluster", "./commitlog"}, e.Pkgs())
}

func TestParseTestsAtTheModuleRoot(t *testing.T) {
	src := "package x\n\nfunc f() {\n\t// exercise 02.1: t\n\t// hint: h\n\t// tests: TestA, ./.TestB, ./sub/pkg.TestC, TestA\n\tf()\n\t// end exercise\n}\n"
	exs, err := parseExercises("stage02-reactor/x.go", "stage02-reactor", []byte(src))
	require.NoError(t, err)
	require.Equal(t, []TestRef{{".", "TestA"}, {".", "TestB"}, {"./sub/pkg", "TestC"}}, exs[0].Tests, "each test once")
}

// marked builds a file whose function f holds body.
func marked(body string) string {
	return "package x\n\nfunc f() int {\n" + body + "\treturn 0\n}\n"
}

func TestParseRefusesMalformedMarkersNamingFileAndLine(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unclosed", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA\n\t_ = 1\n"),
			"x.go:4: exercise 01.1 is never closed"},
		{"nested", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA\n\t// exercise 01.2: u\n\t// hint: h\n\t// tests: TestB\n\t_ = 1\n\t// end exercise\n"),
			"x.go:7: exercise 01.2 opens inside exercise 01.1 (opened at line 4)"},
		{"duplicate id", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA\n\t_ = 1\n\t// end exercise\n\t// exercise 01.1: u\n\t// hint: h\n\t// tests: TestA\n\t_ = 2\n\t// end exercise\n"),
			"x.go:9: exercise 01.1 is marked twice: also at line 4"},
		{"missing tests line", marked("\t// exercise 01.1: t\n\t// hint: h\n\t_ = 1\n\t// end exercise\n"),
			"x.go:4: exercise 01.1 has no // tests: line"},
		{"empty tests line", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: \n\t_ = 1\n\t// end exercise\n"),
			"x.go:4: exercise 01.1: its // tests: line names no test"},
		{"missing hint", marked("\t// exercise 01.1: t\n\t// tests: TestA\n\t_ = 1\n\t// end exercise\n"),
			"x.go:4: exercise 01.1 has no // hint: line"},
		{"not a test name", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA/sub\n\t_ = 1\n\t// end exercise\n"),
			`x.go:6: exercise 01.1: "TestA/sub" is not the name of a test function`},
		{"another package without ./", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: cluster.TestA\n\t_ = 1\n\t// end exercise\n"),
			`x.go:6: exercise 01.1: test "cluster.TestA": write another package's test as ./path/to/pkg.TestName`},
		{"no code", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA\n\t// end exercise\n"),
			"x.go:4: exercise 01.1 has no code between its header and its end"},
		{"wrong stage", marked("\t// exercise 02.1: t\n\t// hint: h\n\t// tests: TestA\n\t_ = 1\n\t// end exercise\n"),
			"x.go:4: exercise 02.1 belongs to stage 02, but stage01-log/x.go is in stage01-log"},
		{"malformed opening", marked("\t// exercise 1.1 t\n\t_ = 1\n"),
			`x.go:4: malformed exercise marker "// exercise 1.1 t": want // exercise NN.M: title`},
		{"exercise zero", marked("\t// exercise 01.0: t\n\t_ = 1\n"),
			`x.go:4: malformed exercise marker "// exercise 01.0: t"`},
		{"end without an exercise", marked("\t_ = 1\n\t// end exercise\n"),
			"x.go:5: // end exercise without an exercise open"},
		{"malformed end", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA\n\t_ = 1\n\t// end exercise 01.1\n"),
			`x.go:8: malformed end marker "// end exercise 01.1"`},
		{"outside a function body", "package x\n\n// exercise 01.1: t\n// hint: h\n// tests: TestA\nvar v = 1\n\n// end exercise\n",
			"x.go:3: exercise 01.1 is outside a function body"},
		{"ends in another block", marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA\n\tif true {\n\t\t_ = 1\n\t\t// end exercise\n\t}\n"),
			"x.go:9: exercise 01.1 ends in another block than it starts (line 4)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseExercises("stage01-log/x.go", "stage01-log", []byte(tc.src))
			require.Error(t, err)
			require.Contains(t, err.Error(), "stage01-log/"+tc.want)
		})
	}
}

func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	src := marked("\t// exercise 01.1: t\n\t_ = 1\n\t// end exercise\n\t// end exercise\n")
	_, err := parseExercises("stage01-log/x.go", "stage01-log", []byte(src))
	require.ErrorContains(t, err, "x.go:4: exercise 01.1 has no // tests: line")
	require.ErrorContains(t, err, "x.go:4: exercise 01.1 has no // hint: line")
	require.ErrorContains(t, err, "x.go:7: // end exercise without an exercise open")
}

func TestFindRefusesAnIDMarkedInTwoFiles(t *testing.T) {
	root := t.TempDir()
	one := marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA\n\t_ = 1\n\t// end exercise\n")
	writeFiles(t, root, map[string]string{
		"stage01-log/a/a.go": one,
		"stage01-log/b/b.go": one,
	})
	_, err := findExercises(root, nil)
	require.ErrorContains(t, err, "stage01-log/b/b.go:4: exercise 01.1 is marked twice: also at stage01-log/a/a.go:4")
}

func TestFindLooksOnlyInTheStagesAskedFor(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"stage01-log/a.go":              marked("\t// exercise 01.1: t\n\t// hint: h\n\t// tests: TestA\n\t_ = 1\n\t// end exercise\n"),
		"stage02-reactor/b.go":          marked("\t// exercise 02.1: u\n\t// hint: h\n\t// tests: TestB\n\t_ = 1\n\t// end exercise\n"),
		"stage02-reactor/b_test.go":     "package x\n\n// exercise 02.9: tests are not searched\n",
		"stage02-reactor/testdata/c.go": "// exercise 02.9: nor is testdata\n",
		"other/x.go":                    "// exercise 07.1: nor what is not a stage\n",
		"final/y.go":                    marked("\t// exercise 08.1: v\n\t// hint: h\n\t// tests: TestC\n\t_ = 1\n\t// end exercise\n"),
		"docs/02-reactor.md":            "# chapter 2\n",
	})
	exs, err := findExercises(root, []string{"02"})
	require.NoError(t, err)
	require.Len(t, exs, 1)
	require.Equal(t, "02.1", exs[0].ID)
	require.Equal(t, "docs/02-reactor.md", exs[0].Doc)
	require.Equal(t, "exercise 02.1: u (see docs/02-reactor.md, Your turn)", exs[0].Message())

	exs, err = findExercises(root, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"01.1", "02.1", "08.1"}, []string{exs[0].ID, exs[1].ID, exs[2].ID}, "final holds chapters 7 and 8's tasks")

	_, err = findExercises(root, []string{"03"})
	require.ErrorContains(t, err, "stage 03: no folder stage03-*")
}

func TestParseStages(t *testing.T) {
	stages, err := parseStages("01, 2,01")
	require.NoError(t, err)
	require.Equal(t, []string{"01", "02"}, stages)
	_, err = parseStages("one")
	require.ErrorContains(t, err, `stage "one"`)
	require.Equal(t, -1, compareIDs("01.2", "01.10"))
}

// writeFiles writes files (slash paths under root) with their contents.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(strings.TrimPrefix(content, "\n")), 0o644))
	}
}
