package main

import (
	"go/parser"
	"go/token"
	"testing"

	"github.com/stretchr/testify/require"
)

const sumFile = `package calc

import (
	"fmt"
	"strconv" // only the exercise parses
	"strings"

	str "strings"
)

// Sum adds the numbers of a comma-separated list.
func Sum(list string) (int, error) {
	// exercise 01.1: add up a list
	// hint: split it, then strconv.Atoi each part
	// tests: TestSum
	total := 0
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return 0, fmt.Errorf("sum %q: %w", list, err)
		}
		total += n
	}
	return total, nil
	// end exercise
}

func Upper(s string) string {
	return str.ToUpper(fmt.Sprint(s))
}
`

const sumBlanked = `package calc

import (
	"fmt"

	str "strings"
)

// Sum adds the numbers of a comma-separated list.
func Sum(list string) (int, error) {
	// exercise 01.1: add up a list
	// hint: split it, then strconv.Atoi each part
	// tests: TestSum
	panic("exercise 01.1: add up a list (see docs/01-log.md, Your turn)")
	// end exercise
}

func Upper(s string) string {
	return str.ToUpper(fmt.Sprint(s))
}
`

func TestBlankKeepsTheMarkersAndDropsImportsOnlyTheRegionUsed(t *testing.T) {
	exs, err := parseExercises("stage01-log/calc/sum.go", "stage01-log", []byte(sumFile))
	require.NoError(t, err)
	exs[0].Doc = "docs/01-log.md"
	out, err := blankFile("stage01-log/calc/sum.go", []byte(sumFile), exs)
	require.NoError(t, err)
	require.Equal(t, sumBlanked, string(out), "strconv and strings go with their comment, fmt and the aliased strings stay")

	again, err := parseExercises("stage01-log/calc/sum.go", "stage01-log", out)
	require.NoError(t, err, "the tool finds the exercise again in a learner's copy")
	require.True(t, again[0].Blank)
	require.Equal(t, exs[0].Tests, again[0].Tests)
	again[0].Doc = exs[0].Doc
	twice, err := blankFile("stage01-log/calc/sum.go", out, again)
	require.NoError(t, err)
	require.Equal(t, string(out), string(twice), "blanking a blank changes nothing")
}

func TestBlankDropsAWholeImportDeclaration(t *testing.T) {
	src := "package x\n\nimport \"strconv\"\n\n// F parses.\nfunc F(s string) int {\n\t// exercise 03.2: parse it\n\t// hint: strconv\n\t// tests: TestF\n\tn, _ := strconv.Atoi(s)\n\treturn n\n\t// end exercise\n}\n"
	exs, err := parseExercises("stage03-replication/x.go", "stage03-replication", []byte(src))
	require.NoError(t, err)
	out, err := blankFile("stage03-replication/x.go", []byte(src), exs)
	require.NoError(t, err)
	require.Equal(t, "package x\n\n// F parses.\nfunc F(s string) int {\n\t// exercise 03.2: parse it\n\t// hint: strconv\n\t// tests: TestF\n"+
		"\tpanic(\"exercise 03.2: parse it (see docs/, Your turn)\")\n\t// end exercise\n}\n", string(out))
}

func TestBlankLeavesOtherExercisesOfTheFile(t *testing.T) {
	src := marked("\t// exercise 01.1: one\n\t// hint: h\n\t// tests: TestA\n\t_ = 1\n\t// end exercise\n" +
		"\t// exercise 01.2: two\n\t// hint: h\n\t// tests: TestB\n\t_ = 2\n\t// end exercise\n")
	exs, err := parseExercises("stage01-log/x.go", "stage01-log", []byte(src))
	require.NoError(t, err)
	out, err := blankFile("stage01-log/x.go", []byte(src), exs[1:])
	require.NoError(t, err)
	after, err := parseExercises("stage01-log/x.go", "stage01-log", out)
	require.NoError(t, err)
	require.False(t, after[0].Blank)
	require.True(t, after[1].Blank)
	require.Contains(t, string(out), "\t_ = 1\n")
	require.NotContains(t, string(out), "\t_ = 2\n")
}

func TestImportNames(t *testing.T) {
	for path, want := range map[string]string{
		`"encoding/binary"`:           "binary",
		`"math/rand/v2"`:              "rand",
		`"gopkg.in/yaml.v3"`:          "yaml",
		`"github.com/pierrec/lz4/v4"`: "lz4",
		`"github.com/x/go-foo"`:       "foo",
	} {
		src := "package x\n\nimport " + path + "\n"
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, parser.ImportsOnly)
		require.NoError(t, err)
		require.Equal(t, want, importName(f.Imports[0]), path)
	}
}
