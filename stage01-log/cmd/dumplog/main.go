// Command dumplog prints the contents of Kafka log segments and indexes, as
// Kafka's kafka-dump-log.sh does. It reads any Kafka-format segment, not
// only ours: the format is the contract.
//
//	dumplog --files 00000000000000000000.log[,00000000000000000000.index...] [--print-data-log]
//
// For a .log file it prints one line per batch and, with --print-data-log,
// one line per record. Bytes after the last valid batch are reported, as
// Kafka reports them. .index and .timeindex files print their entries.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	files := flag.String("files", "", "comma-separated segment files to dump (.log, .index, .timeindex)")
	printData := flag.Bool("print-data-log", false, "print each record's offset, key and payload")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: dumplog --files <path>.log[,<path>...] [--print-data-log]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *files == "" {
		flag.Usage()
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	failed := false
	for _, path := range strings.Split(*files, ",") {
		if err := dump(out, path, *printData); err != nil {
			out.Flush()
			fmt.Fprintf(os.Stderr, "dumplog: %v\n", err)
			failed = true
		}
	}
	if failed {
		out.Flush()
		os.Exit(1)
	}
}
