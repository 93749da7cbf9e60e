package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCodecsTestdataHoldsEveryRow: the saved BenchmarkCodecs output has,
// for every codec the figure draws, the ratio and produce-MB/s of each
// run, and the compressed rows store less than the uncompressed one.
func TestCodecsTestdataHoldsEveryRow(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "codecs.txt"))
	require.NoError(t, err)
	defer f.Close()
	res, err := parse(f)
	require.NoError(t, err)
	none, err := res.median("BenchmarkCodecs/none", "ratio")
	require.NoError(t, err)
	for _, row := range codecRows {
		name := "BenchmarkCodecs/" + row.name
		require.Len(t, res.metrics[name]["produce-MB/s"], 3, name)
		ratio, err := res.median(name, "ratio")
		require.NoError(t, err)
		if row.name != "none" {
			require.Less(t, ratio, none, name)
		}
	}
}

func TestCodecsWithoutARowNamesIt(t *testing.T) {
	in := "BenchmarkCodecs/none-2 1 800000000 ns/op 5.5 broker-ms/MB 160 consume-MB/s 135 produce-MB/s 1.04 ratio\n"
	err := run([]string{"-kind", "codecs", "-out", filepath.Join(t.TempDir(), "x.png")}, strings.NewReader(in), &bytes.Buffer{})
	require.ErrorContains(t, err, "no produce-MB/s for BenchmarkCodecs/gzip")
}
