package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTestEventsTellsEachTestsFate(t *testing.T) {
	out := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"run","Package":"p","Test":"TestB"}`,
		`{"Action":"run","Package":"p","Test":"TestB/sub"}`,
		`{"Action":"output","Package":"p","Test":"TestB/sub","Output":"    b_test.go:9: wrong\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB/sub"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"run","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"panic: exercise 01.5: recover a log (see docs/01-log.md, Your turn)\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"goroutine 7 [running]:\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
	}, "\n")
	res := parseTestEvents([]byte(out), func(s string) string { return s })
	require.True(t, res.started)
	require.False(t, res.BuildFailed)
	require.Equal(t, testPass, res.Tests["TestA"].Status)
	require.Equal(t, testFail, res.Tests["TestB"].Status)
	require.Equal(t, []string{"b_test.go:9: wrong"}, excerpt(res.Tests["TestB"].Output, 10), "a subtest's lines are its test's")
	require.Equal(t, testFail, res.Tests["TestC"].Status, "running when its binary died")
	require.Equal(t, "exercise 01.5", reachedExercise(res.Tests["TestC"].Output))
	require.Equal(t, []string{"panic: exercise 01.5: recover a log (see docs/01-log.md, Your turn)", "..."}, excerpt(res.Tests["TestC"].Output, 10))
	require.Len(t, res.Tests, 3)
}

func TestParseTestEventsSeesABuildFailure(t *testing.T) {
	out := strings.Join([]string{
		`{"ImportPath":"p [p.test]","Action":"build-output","Output":"# p [p.test]\n"}`,
		`{"ImportPath":"p [p.test]","Action":"build-output","Output":"/tmp/verify/0/sum.go:3:2: declared and not used: y\n"}`,
		`{"ImportPath":"p [p.test]","Action":"build-fail"}`,
		`{"Action":"start","Package":"p"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}`,
		`{"Action":"fail","Package":"p","FailedBuild":"p [p.test]"}`,
	}, "\n")
	g := &goTester{Rename: map[string]string{"/tmp/verify/0/sum.go": "stage01-log/p/sum.go"}}
	res := parseTestEvents([]byte(out), g.rename)
	require.True(t, res.BuildFailed)
	require.Equal(t, "# p [p.test]\nstage01-log/p/sum.go:3:2: declared and not used: y\n", res.BuildOutput)
	require.Empty(t, res.Tests)
}

func TestRunPatternMatchesOnlyThoseTests(t *testing.T) {
	require.Equal(t, "^(TestA|TestB)$", runPattern([]string{"TestA", "TestB"}))
}

// A test that runs past TestTimeout gets SIGQUIT: the binary dumps its
// goroutines into the test's output and exits, long before go test's own
// -timeout.
func TestATestPastItsBoundIsStoppedWithADump(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"go.mod":            "module example.com/hang\n\ngo 1.26.0\n",
		"hang/hang_test.go": "package hang\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestHangs(t *testing.T) { time.Sleep(time.Hour) }\n\nfunc TestAfter(t *testing.T) {}\n",
	})
	start := time.Now()
	g := &goTester{Dir: root, Timeout: 5 * time.Minute, TestTimeout: 3 * time.Second}
	res, err := g.run("./hang", []string{"TestHangs", "TestAfter"})
	require.NoError(t, err)
	require.Less(t, time.Since(start), time.Minute, "stopped at its bound, not at go test's -timeout")
	require.Equal(t, testFail, res.Tests["TestHangs"].Status)
	require.True(t, timedOut(res.Tests["TestHangs"].Output), "the dump is the test's output")
	require.Equal(t, testPass, res.Tests["TestAfter"].Status, "the tests after it run again without it")
}
