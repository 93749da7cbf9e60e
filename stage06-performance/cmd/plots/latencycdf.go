package main

import (
	"bufio"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// cdfAim is the end-to-end p99, drawn as a line.
const cdfAim = 5.0 // ms

// cdfSeries is one latency run of final/cmd/clusterbench --cdf: where the
// brokers ran, how the records were paced, the setup, the clients, and
// which latency (e2e or ack); points are (ms, quantile).
type cdfSeries struct {
	brokers, pace, setup, client, kind string
	points                             plotter.XYs
}

// readCDF reads clusterbench's --cdf lines (tab-separated: brokers, pace,
// setup, client, kind, quantile, ms), merging none: a series that
// appears in several runs keeps its last.
func readCDF(r io.Reader) ([]*cdfSeries, error) {
	var out []*cdfSeries
	byKey := map[string]*cdfSeries{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 7 {
			return nil, fmt.Errorf("line %d: %d fields, want 7 (clusterbench --cdf)", line, len(f))
		}
		q, err1 := strconv.ParseFloat(f[5], 64)
		ms, err2 := strconv.ParseFloat(f[6], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: quantile %q, ms %q", line, f[5], f[6])
		}
		key := strings.Join(f[:5], "\t")
		s := byKey[key]
		if s == nil || (len(s.points) > 0 && q <= s.points[len(s.points)-1].Y) { // a new run of the same series
			s = &cdfSeries{brokers: f[0], pace: f[1], setup: f[2], client: f[3], kind: f[4]}
			if old := byKey[key]; old != nil {
				out = slices.DeleteFunc(out, func(x *cdfSeries) bool { return x == old })
			}
			byKey[key] = s
			out = append(out, s)
		}
		s.points = append(s.points, plotter.XY{X: max(ms, 0.01), Y: q})
	}
	return out, sc.Err()
}

// nines is a quantile's place on a percentile axis that spreads the tail,
// as HdrHistogram's plots do: 0 for p0, 1 for p90, 2 for p99, 3 for p99.9.
func nines(q float64) float64 { return -math.Log10(1 - q) }

// ninesTicks label the percentile axis.
type ninesTicks struct{}

func (ninesTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for _, t := range []struct {
		q     float64
		label string
	}{{0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}, {0.999, "p99.9"}, {0.9999, "p99.99"}} {
		if x := nines(t.q); x >= min && x <= max {
			ticks = append(ticks, plot.Tick{Value: x, Label: t.label})
		}
	}
	return ticks
}

// drawLatencyCDF is chapter 8's latency figure: for RF3 acks=all, each
// record's end-to-end latency (log scale) by percentile, the tail spread
// out (HdrHistogram's percentile plot), one line per place the brokers
// ran (containers, processes), pacing and client, with the 5 ms aim.
func drawLatencyCDF(r io.Reader) (*plot.Plot, error) {
	all, err := readCDF(r)
	if err != nil {
		return nil, err
	}
	p := plot.New()
	p.Title.Text = "RF3 acks=all, 10,000 records/s: Produce call to the consumer's poll"
	p.X.Label.Text = "percentile of records"
	p.Y.Label.Text = "end-to-end latency, ms (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Tick.Marker = ninesTicks{}
	n := 0
	lowest, highest := math.Inf(1), 0.0
	for _, s := range all {
		if s.kind != "e2e" || !strings.HasPrefix(s.setup, "RF3") {
			continue
		}
		xys := make(plotter.XYs, len(s.points))
		for i, pt := range s.points {
			xys[i] = plotter.XY{X: nines(pt.Y), Y: pt.X}
			lowest, highest = min(lowest, pt.X), max(highest, pt.X)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		// The client is the colour, the place the width, the pacing the dashes.
		line.Color = plotutil.Color(0)
		if s.client != "ours" {
			line.Color = plotutil.Color(2)
		}
		line.Width = vg.Points(1)
		if s.brokers == "containers" {
			line.Width = vg.Points(2.5)
		}
		pace := "bursts every 2 ms"
		if s.pace != "kafka" {
			pace = "a record every 100 µs"
			line.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		}
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s, %s, brokers in %s", s.client, pace, s.brokers), line)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("no RF3 end-to-end series in the input")
	}
	p.X.Min, p.X.Max = 0, nines(0.9999)
	p.Y.Min, p.Y.Max = math.Max(0.1, lowest*0.8), math.Max(highest*8, 2*cdfAim) // room for the legend
	aim, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: cdfAim}, {X: p.X.Max, Y: cdfAim}})
	if err != nil {
		return nil, err
	}
	aim.Color = color.Gray{Y: 100}
	aim.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p99, err := plotter.NewLine(plotter.XYs{{X: nines(0.99), Y: p.Y.Min}, {X: nines(0.99), Y: p.Y.Max}})
	if err != nil {
		return nil, err
	}
	p99.Color = color.Gray{Y: 180}
	p.Add(aim, p99, plotter.NewGrid())
	p.Legend.Add("the aim: 5 ms at p99", aim)
	p.Legend.Top, p.Legend.Left = true, true
	return p, nil
}
