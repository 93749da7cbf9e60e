package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// results are the metrics of a `go test -bench` output: for each
// benchmark (its name without the -GOMAXPROCS suffix) and each unit, the
// values of every run, in order.
type results struct {
	metrics map[string]map[string][]float64
	order   []string // benchmark names as they first appeared
}

// procsSuffix is the -GOMAXPROCS that go test appends to a name.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// parse reads benchmark lines ("BenchmarkX/y-2  N  v unit  v unit ...")
// and skips every other line (goos, PASS, logs).
func parse(r io.Reader) (results, error) {
	res := results{metrics: map[string]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a log line that starts with a benchmark's name
		}
		name := procsSuffix.ReplaceAllString(f[0], "")
		m := res.metrics[name]
		if m == nil {
			m = map[string][]float64{}
			res.metrics[name] = m
			res.order = append(res.order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return res, fmt.Errorf("line %d: %q is not a number: %w", line, f[i], err)
			}
			m[f[i+1]] = append(m[f[i+1]], v)
		}
	}
	return res, sc.Err()
}

// median is the median of benchmark name's unit over its runs.
func (res results) median(name, unit string) (float64, error) {
	vs := res.metrics[name][unit]
	if len(vs) == 0 {
		return 0, fmt.Errorf("no %s for %s in the input", unit, name)
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], nil
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, nil
}

// plainTicks are gonum's default ticks labelled without decimals or
// exponents (60000, not 60000.00).
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}
