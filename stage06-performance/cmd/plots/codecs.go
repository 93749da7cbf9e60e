package main

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The rows of BenchmarkCodecs (stage06 ./server), by sub-benchmark name,
// how the figure labels them, and where the label goes from the point (in
// points: three codecs store about 0.13 of the bytes, so their labels
// go above, right and below).
var codecRows = []struct {
	name, label string
	dx, dy      float64
}{
	{"none", "none", 7, -4},
	{"gzip", "gzip", -12, 9},
	{"snappy", "snappy", 7, 2},
	{"lz4", "lz4", 7, -12},
	{"zstd", "zstd", 7, 2},
	{"none-stored-as-zstd", "none, topic zstd: broker compresses", -20, -18},
}

// drawCodecs is seed §2.1.6's trade: one labelled point per codec, the
// median compression ratio (bytes stored / bytes of the values: lower is
// smaller) against the median produce MB/s (values, the producer
// compressing). Down and to the right is better on both counts.
func drawCodecs(res results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "200,000 JSON events of ~300 B, franz-go to 1 broker, acks=all (median)"
	p.X.Label.Text = "produce MB/s of values"
	p.Y.Label.Text = "bytes stored / bytes of values"
	highest := 0.0
	for i, row := range codecRows {
		name := "BenchmarkCodecs/" + row.name
		mbs, err := res.median(name, "produce-MB/s")
		if err != nil {
			return nil, err
		}
		ratio, err := res.median(name, "ratio")
		if err != nil {
			return nil, err
		}
		xy := plotter.XY{X: mbs, Y: ratio}
		s, err := plotter.NewScatter(plotter.XYs{xy})
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(i), Shape: plotutil.Shape(i), Radius: vg.Points(4)}
		p.Add(s)
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{xy}, Labels: []string{fmt.Sprintf("%s %.2f", row.label, ratio)}})
		if err != nil {
			return nil, err
		}
		l.Offset = vg.Point{X: vg.Points(row.dx), Y: vg.Points(row.dy)}
		p.Add(l)
		highest = max(highest, mbs)
	}
	p.X.Min, p.X.Max = 0, 1.4*highest // room for the labels on the right
	p.Y.Min, p.Y.Max = 0, 1.15
	p.Y.Tick.Marker = stepTicks(0.2)
	p.X.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	return p, nil
}
