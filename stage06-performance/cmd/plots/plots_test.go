package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTakesBenchmarkLinesAndMedians(t *testing.T) {
	in := `goos: linux
BenchmarkThreads/net=1/io=1-2   	   20000	     51617 ns/op	     37748 p99-µs	     19374 req/s
--- BENCH: BenchmarkThreads
    threads_test.go:12: BenchmarkThreads says something
BenchmarkThreads/net=1/io=1-2   	   20000	     50000 ns/op	     30000 p99-µs	     20000 req/s
BenchmarkThreads/net=1/io=1-2   	   20000	     52000 ns/op	     40000 p99-µs	     18000 req/s
BenchmarkBrokerCeiling-2   	       1	      5522 raw-MB/s	       533.5 rf1-MB/s
PASS
`
	res, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, []string{"BenchmarkThreads/net=1/io=1", "BenchmarkBrokerCeiling"}, res.order)
	require.Equal(t, []float64{19374, 20000, 18000}, res.metrics["BenchmarkThreads/net=1/io=1"]["req/s"])
	m, err := res.median("BenchmarkThreads/net=1/io=1", "req/s")
	require.NoError(t, err)
	require.Equal(t, 19374.0, m)
	m, err = res.median("BenchmarkBrokerCeiling", "rf1-MB/s")
	require.NoError(t, err)
	require.Equal(t, 533.5, m)
	_, err = res.median("BenchmarkBrokerCeiling", "rf3-MB/s")
	require.ErrorContains(t, err, "no rf3-MB/s for BenchmarkBrokerCeiling")
}

func TestMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo(t *testing.T) {
	res, err := parse(strings.NewReader("BenchmarkX-2 1 1 u\nBenchmarkX-2 1 4 u\nBenchmarkX-2 1 2 u\nBenchmarkX-2 1 9 u\n"))
	require.NoError(t, err)
	m, err := res.median("BenchmarkX", "u")
	require.NoError(t, err)
	require.Equal(t, 3.0, m)
}

// TestEveryKindDrawsAPNGFromItsBenchmark: each kind reads its testdata
// file (real output of its benchmark) and writes a PNG.
func TestEveryKindDrawsAPNGFromItsBenchmark(t *testing.T) {
	for name := range kinds {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), name+".png")
			require.NoError(t, run([]string{"-kind", name, "-in", filepath.Join("testdata", name+".txt"), "-out", out}, nil, &bytes.Buffer{}))
			png, err := os.ReadFile(out)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "a PNG")
		})
	}
}

func TestAKindWithoutItsMetricsIsAnError(t *testing.T) {
	err := run([]string{"-kind", "ceiling", "-out", filepath.Join(t.TempDir(), "x.png")},
		strings.NewReader("BenchmarkBrokerCeiling-2 1 5522 raw-MB/s\n"), &bytes.Buffer{})
	require.ErrorContains(t, err, "sink-MB/s")
}

func TestListNamesEveryKind(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-list"}, nil, &out))
	for name := range kinds {
		require.Contains(t, out.String(), name)
	}
}
