package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The grid of BenchmarkThreads.
var (
	networkThreads = []int{1, 2, 3}
	ioThreads      = []int{1, 2, 4, 8}
)

// seedPerHandler is seed §3.1's claim: each RequestHandler thread handles
// 2,000 requests a second.
const seedPerHandler = 2000

// drawThreads is a grouped bar chart: one group per num.io.threads, one
// bar per num.network.threads, the median requests/s; and the seed's
// claim, 2,000 × num.io.threads, as a line.
func drawThreads(res results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Small Produce requests, 64 closed-loop connections, 2 cores"
	p.X.Label.Text = "num.io.threads"
	p.Y.Label.Text = "requests/s (median)"
	const width = 20
	highest := 0.0
	for i, n := range networkThreads {
		vals := make(plotter.Values, len(ioThreads))
		for j, io := range ioThreads {
			v, err := res.median(fmt.Sprintf("BenchmarkThreads/net=%d/io=%d", n, io), "req/s")
			if err != nil {
				return nil, err
			}
			vals[j] = v
			highest = max(highest, v)
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(width))
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Points(float64(i-len(networkThreads)/2) * width)
		p.Add(bars)
		p.Legend.Add(fmt.Sprintf("num.network.threads=%d", n), bars)
	}
	claim := make(plotter.XYs, len(ioThreads))
	for j, io := range ioThreads {
		claim[j] = plotter.XY{X: float64(j), Y: float64(seedPerHandler * io)}
	}
	line, points, err := plotter.NewLinePoints(claim)
	if err != nil {
		return nil, err
	}
	line.Color, points.Color = color.Black, color.Black
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(line, points)
	p.Legend.Add("seed §3.1: 2,000 per handler thread", line, points)
	p.Legend.Top, p.Legend.Left = true, true
	names := make([]string, len(ioThreads))
	for j, io := range ioThreads {
		names[j] = fmt.Sprint(io)
	}
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, 1.4*max(highest, seedPerHandler*float64(ioThreads[len(ioThreads)-1])) // room for the legend
	p.Y.Tick.Marker = plainTicks{}
	return p, nil
}
