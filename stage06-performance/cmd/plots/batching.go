package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The grid of BenchmarkBatching (stage06 ./producer), as fast as the
// producer goes: batch.size in bytes, linger.ms.
var (
	batchSizes = []int{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20}
	lingers    = []int{0, 5, 20}
)

// kafkaBatchSize is Kafka's default batch.size.
const kafkaBatchSize = 16 << 10

// drawBatching is seed §2.2.1's curve: the median records/s against
// batch.size on a log scale, one line per linger.ms, with Kafka's default
// batch.size marked.
func drawBatching(res results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Our producer, 100 B records, acks=1, 6 partitions, 1 broker, 2 cores"
	p.X.Label.Text = "batch.size (bytes, log scale)"
	p.Y.Label.Text = "million records/s (median of runs)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	highest := 0.0
	for i, linger := range lingers {
		xys := make(plotter.XYs, len(batchSizes))
		for j, size := range batchSizes {
			v, err := res.median(fmt.Sprintf("BenchmarkBatching/batch.size=%d/linger.ms=%d", size, linger), "records/s")
			if err != nil {
				return nil, err
			}
			xys[j] = plotter.XY{X: float64(size), Y: v / 1e6}
			highest = max(highest, v/1e6)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("linger.ms=%d", linger), line, points)
	}
	p.Y.Min, p.Y.Max = 0, 1.3*highest // room for the legend
	p.Y.Tick.Marker = stepTicks(0.25)
	def, err := plotter.NewLine(plotter.XYs{{X: kafkaBatchSize, Y: 0}, {X: kafkaBatchSize, Y: p.Y.Max}})
	if err != nil {
		return nil, err
	}
	def.Color = color.Gray{Y: 100}
	def.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(def)
	p.Legend.Add("Kafka's default batch.size (16 KiB)", def)
	p.Legend.Top, p.Legend.Left = true, true
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // the batch sizes are ticks enough
	p.Add(grid)
	return p, nil
}

// sizeTicks label BenchmarkBatching's batch sizes in KiB and MiB.
type sizeTicks struct{}

func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for _, s := range batchSizes {
		if float64(s) < min || float64(s) > max {
			continue
		}
		label := fmt.Sprintf("%d KiB", s>>10)
		if s >= 1<<20 {
			label = fmt.Sprintf("%d MiB", s>>20)
		}
		ticks = append(ticks, plot.Tick{Value: float64(s), Label: label})
	}
	return ticks
}

// stepTicks are ticks at every multiple of a step.
type stepTicks float64

func (s stepTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for k := math.Ceil(min / float64(s)); k*float64(s) <= max; k++ {
		v := k * float64(s)
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)}) // 0.6, not 0.6000000000000001
	}
	return ticks
}
