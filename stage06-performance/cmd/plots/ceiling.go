package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// aim is issue 13's: the broker at ≥ 0.8 × a raw write of the same bytes.
const aim = 0.8

// drawCeiling is a bar chart of BenchmarkBrokerCeiling's median MB/s per
// phase, each bar labelled with its value and its ratio to raw, and the
// aim as a dashed line.
func drawCeiling(res results) (*plot.Plot, error) {
	const name = "BenchmarkBrokerCeiling"
	phases := []struct{ unit, label string }{
		{"raw-MB/s", "raw write(2)"},
		{"sink-MB/s", "TCP sink"},
		{"rf1-MB/s", "RF1 acks=1"},
		{"rf3-MB/s", "RF3 acks=all"},
	}
	vals := make(plotter.Values, len(phases))
	names := make([]string, len(phases))
	for i, ph := range phases {
		v, err := res.median(name, ph.unit)
		if err != nil {
			return nil, err
		}
		vals[i], names[i] = v, ph.label
	}
	p := plot.New()
	p.Title.Text = "512 MiB of 110 KB batches of 100 B records (median)"
	p.Y.Label.Text = "MB/s of batch bytes"
	bars, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return nil, err
	}
	bars.Color = plotutil.Color(0)
	bars.LineStyle.Width = 0
	p.Add(bars)

	labels := plotter.XYLabels{XYs: make(plotter.XYs, len(vals)), Labels: make([]string, len(vals))}
	for i, v := range vals {
		labels.XYs[i] = plotter.XY{X: float64(i), Y: v}
		labels.Labels[i] = fmt.Sprintf("%.0f (%.2f×)", v, v/vals[0])
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = -0.5 // centred over the bar
	}
	l.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(l)

	line, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: aim * vals[0]}, {X: float64(len(vals)) - 0.5, Y: aim * vals[0]}})
	if err != nil {
		return nil, err
	}
	line.Color = color.Black
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(line)
	p.Legend.Add(fmt.Sprintf("aim: %.1f × raw", aim), line)
	p.Legend.Top = true
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max = vals[0] * 1.1
	p.Y.Tick.Marker = plainTicks{}
	return p, nil
}
