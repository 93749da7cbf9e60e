package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchingTestdataHoldsTheWholeGrid: the saved BenchmarkBatching
// output has every batch.size × linger.ms the figure draws, with its
// records/s, and the rate-limited rows the chapter's table reads.
func TestBatchingTestdataHoldsTheWholeGrid(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "batching.txt"))
	require.NoError(t, err)
	defer f.Close()
	res, err := parse(f)
	require.NoError(t, err)
	for _, size := range batchSizes {
		for _, linger := range lingers {
			name := fmt.Sprintf("BenchmarkBatching/batch.size=%d/linger.ms=%d", size, linger)
			v, err := res.median(name, "records/s")
			require.NoError(t, err)
			require.Positive(t, v, name)
			_, err = res.median(name, "records/batch")
			require.NoError(t, err)
		}
	}
	_, err = res.median("BenchmarkBatching/throughput=50000/linger.ms=5", "mean-ms")
	require.NoError(t, err)
}

func TestBatchingWithoutACellNamesIt(t *testing.T) {
	in := "BenchmarkBatching/batch.size=1024/linger.ms=0-2 1 200000 records/s\n"
	err := run([]string{"-kind", "batching", "-out", filepath.Join(t.TempDir(), "x.png")}, strings.NewReader(in), &bytes.Buffer{})
	require.ErrorContains(t, err, "no records/s for BenchmarkBatching/batch.size=4096/linger.ms=0")
}

func TestBatchSizeTicksReadInKiBAndMiB(t *testing.T) {
	var labels []string
	for _, tick := range (sizeTicks{}).Ticks(1024, 1<<20) {
		labels = append(labels, tick.Label)
	}
	require.Equal(t, []string{"1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB"}, labels)
}

func TestStepTicksCarryNoFloatingPointNoise(t *testing.T) {
	var labels []string
	for _, tick := range stepTicks(0.2).Ticks(0, 1.15) {
		labels = append(labels, tick.Label)
	}
	require.Equal(t, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}, labels)
}
