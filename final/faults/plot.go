package faults

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The two timeouts most waits are made of (DefaultBrokerProps): a dead or
// frozen broker is noticed when its ZooKeeper session expires, a leader
// cut from its followers when they fall out of its ISR.
const (
	sessionTimeoutSecs = 6
	replicaLagSecs     = 10
)

// Plot draws the report's unavailability: one row per kind of fault, one
// dot per injection at the worst partition's longest wait for an
// acknowledgement, and the session and replica-lag timeouts as lines.
// gonum/plot, as stage 06's figures: pure Go, a PNG for the chapter.
func (r *Report) Plot() (*plot.Plot, error) {
	p, _, err := r.plot()
	return p, err
}

// waitsByKind lists the kinds injected, in Kinds' order, and for each the
// worst partition's longest wait of every injection, in seconds.
func (r *Report) waitsByKind() ([]Kind, [][]float64) {
	var kinds []Kind
	var waits [][]float64
	for _, k := range Kinds {
		var w []float64
		for _, f := range r.Faults {
			if f.Kind == k {
				w = append(w, f.Gap.Worst.Seconds())
			}
		}
		if len(w) > 0 {
			kinds, waits = append(kinds, k), append(waits, w)
		}
	}
	return kinds, waits
}

func (r *Report) plot() (*plot.Plot, int, error) {
	kinds, waits := r.waitsByKind()
	if len(kinds) == 0 {
		return nil, 0, fmt.Errorf("faults: no fault to plot")
	}
	p := plot.New()
	p.Add(plotter.NewGrid())
	p.Title.Text = fmt.Sprintf("Unavailability per fault (seed %d, %d faults)", r.Seed, len(r.Faults))
	p.X.Label.Text = "longest wait for an acknowledgement on the worst partition"
	p.X.Min = 0
	p.Y.Min, p.Y.Max = -0.7, float64(len(kinds))-0.3

	var ticks []plot.Tick
	longest := float64(replicaLagSecs)
	for row, k := range kinds {
		y := float64(len(kinds) - 1 - row) // the first kind on top
		ticks = append(ticks, plot.Tick{Value: y, Label: string(k)})
		var pts plotter.XYs
		for _, s := range waits[row] {
			pts = append(pts, plotter.XY{X: s, Y: y})
			longest = max(longest, s)
		}
		dots, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, 0, err
		}
		dots.GlyphStyle = draw.GlyphStyle{Color: color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xb0}, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
		p.Add(dots)
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Max = longest * 1.1
	var xticks []plot.Tick
	for x := 0.0; x <= p.X.Max; x += 5 {
		xticks = append(xticks, plot.Tick{Value: x, Label: fmt.Sprintf("%.0f s", x)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(xticks)
	for _, ref := range []struct {
		at    float64
		label string
		dash  []vg.Length
	}{
		{sessionTimeoutSecs, "zookeeper.session.timeout.ms", []vg.Length{vg.Points(4), vg.Points(3)}},
		{replicaLagSecs, "replica.lag.time.max.ms", []vg.Length{vg.Points(1), vg.Points(3)}},
	} {
		line, err := plotter.NewLine(plotter.XYs{{X: ref.at, Y: p.Y.Min}, {X: ref.at, Y: p.Y.Max}})
		if err != nil {
			return nil, 0, err
		}
		line.Color = color.Gray{Y: 0x60}
		line.Dashes = ref.dash
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%d s)", ref.label, int(ref.at)), line)
	}
	p.Legend.Top = true
	return p, len(kinds), nil
}

// SavePlot writes Plot as a PNG.
func (r *Report) SavePlot(path string) error {
	p, rows, err := r.plot()
	if err != nil {
		return err
	}
	w, err := p.WriterTo(18*vg.Centimeter, vg.Length(3.5+0.9*float64(rows))*vg.Centimeter, "png")
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
