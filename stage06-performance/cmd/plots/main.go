// Command plots draws the chapter's figures from benchmark output: it
// reads what `go test -bench` printed (stdin, or -in), takes the median of
// each metric over the -count runs, and writes one PNG.
//
//	go test -run '^$' -bench Threads -benchtime 50000x -count 3 ./ceiling/ | tee threads.txt
//	go run ./cmd/plots -kind threads -in threads.txt -out ../docs/img/06-threads.png
//
// Each kind of plot is a function from the parsed results to a gonum/plot
// Plot, listed in kinds below. Adding a figure is a file with one such
// function and one line in the table; `plots -list` prints the table.
//
// gonum.org/v1/plot, because the project guide names it for the chapters'
// plots: pure Go (no Python or gnuplot on the reader's machine), PNG out.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// kind is one figure.
type kind struct {
	about string                              // one line for -list
	bench string                              // the benchmark whose output it reads
	draw  func(results) (*plot.Plot, error)   // builds the plot from the medians
	read  func(io.Reader) (*plot.Plot, error) // or from its own input, when the figure is not a benchmark's
	w, h  vg.Length                           // the PNG's size
}

// kinds are the figures this command draws, by -kind.
var kinds = map[string]kind{
	"threads": {about: "requests/s per num.network.threads × num.io.threads, with seed §3.1's 2,000 per handler",
		bench: "BenchmarkThreads (stage06 ./ceiling)", draw: drawThreads, w: 16 * vg.Centimeter, h: 10 * vg.Centimeter},
	"ceiling": {about: "MB/s of raw write, sink, RF1 acks=1 and RF3 acks=all, with the aim of 0.8 × raw",
		bench: "BenchmarkBrokerCeiling (stage06 ./ceiling)", draw: drawCeiling, w: 14 * vg.Centimeter, h: 10 * vg.Centimeter},
	"batching": {about: "records/s per batch.size (log scale), one line per linger.ms", bench: "BenchmarkBatching (stage06 ./producer)", draw: drawBatching, w: 16 * vg.Centimeter, h: 10 * vg.Centimeter},
	"latencycdf": {about: "share of records within x ms end to end, RF3 acks=all, one line per place the brokers ran, pacing and client",
		bench: "final/cmd/clusterbench --cdf FILE", read: drawLatencyCDF, w: 16 * vg.Centimeter, h: 13 * vg.Centimeter},
	"codecs": {about: "compression ratio (stored/values) against produce MB/s, a point per codec", bench: "BenchmarkCodecs (stage06 ./server)", draw: drawCodecs, w: 16 * vg.Centimeter, h: 10 * vg.Centimeter},
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plots:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("plots", flag.ContinueOnError)
	fs.SetOutput(stdout)
	kindName := fs.String("kind", "", "the figure to draw (see -list)")
	in := fs.String("in", "", "benchmark output to read (default: stdin)")
	out := fs.String("out", "", "PNG file to write")
	list := fs.Bool("list", false, "list the kinds of figure and the benchmark each reads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *list {
		names := make([]string, 0, len(kinds))
		for name := range kinds {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			fmt.Fprintf(stdout, "%-10s %s\n%-10s   from %s\n", name, kinds[name].about, "", kinds[name].bench)
		}
		return nil
	}
	k, ok := kinds[*kindName]
	if !ok || *out == "" {
		return errors.New("need -kind (one of -list) and -out")
	}
	r := stdin
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	var (
		p   *plot.Plot
		err error
	)
	if k.read != nil {
		p, err = k.read(r)
	} else {
		var res results
		if res, err = parse(r); err == nil {
			p, err = k.draw(res)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", *kindName, err)
	}
	return p.Save(k.w, k.h, *out)
}
