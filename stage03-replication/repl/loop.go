// Package repl holds what the course's interactive demos (cmd/cluster of
// stage 03 and later) share: the command loop.
package repl

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Loop reads commands, one per line, from in, or from script (commands
// separated by ';') if it is not empty, and runs each with run, its words
// split on spaces. Interactively it prompts with "> "; with a script it
// echoes each command after "> ", so the output reads as a transcript. An
// error from run is printed and the loop goes on; "quit" or the end of the
// input ends it.
func Loop(in io.Reader, out io.Writer, script string, run func(args []string) error) error {
	if script != "" {
		in = strings.NewReader(strings.ReplaceAll(script, ";", "\n"))
	}
	sc := bufio.NewScanner(in)
	for {
		if script == "" {
			fmt.Fprint(out, "> ")
		}
		if !sc.Scan() {
			return sc.Err()
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if script != "" {
			fmt.Fprintf(out, "> %s\n", line)
		}
		if line == "quit" {
			return nil
		}
		if err := run(strings.Fields(line)); err != nil {
			fmt.Fprintln(out, "error:", err)
		}
	}
}
