package faults

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestThePlotHasADotPerFaultInARowPerKind: the report's figure has a row
// per kind injected, in Kinds' order, and on it each injection's longest
// wait; a kind never injected gets no row. It is written as a PNG.
func TestThePlotHasADotPerFaultInARowPerKind(t *testing.T) {
	r := &Report{Seed: 42, Faults: []Fault{
		{Kind: Bounce, Gap: Gap{Worst: 500 * time.Millisecond}},
		{Kind: LeaderKill, Gap: Gap{Worst: 7 * time.Second}},
		{Kind: LeaderKill, Gap: Gap{Worst: 5 * time.Second}},
	}}
	kinds, waits := r.waitsByKind()
	require.Equal(t, []Kind{LeaderKill, Bounce}, kinds)
	require.Equal(t, [][]float64{{7, 5}, {0.5}}, waits)

	path := filepath.Join(t.TempDir(), "r.png")
	require.NoError(t, r.SavePlot(path))
	png, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "\x89PNG", string(png[:4]))

	_, err = (&Report{}).Plot()
	require.Error(t, err, "nothing to plot")
}
