package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// breakIt shows a break task: its question and its variant; with run, it
// runs the task's tests with the variant in place (through go test's
// -overlay: nothing in the tree changes) and shows what they say.
func breakIt(w io.Writer, root, id string, run bool, opts checkOptions) error {
	e, err := findTask(root, id)
	if err != nil {
		if m := readManifest(root); m != nil && slices.Contains(m.Stages, id[:2]) {
			return fmt.Errorf("%s is not in this copy: a break task breaks the reference's code, which this copy blanks for you to write; run it in the workbook itself, or in a copy that does not blank stage %s", id, id[:2])
		}
		return err
	}
	if e.Kind != Break {
		return fmt.Errorf("%s is %s task, not a break task (ids such as 04.b1)", id, map[Kind]string{Fill: "an exercise", Build: "a build"}[e.Kind])
	}
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(e.File)))
	if err != nil {
		return err
	}
	lines := strings.Split(string(src), "\n")
	fmt.Fprintf(w, "break %s: %s (%s)\n\n", e.ID, e.Title, e.Where())
	fmt.Fprintf(w, "the code, and the variant that replaces it:\n")
	for l := e.codeFrom; l < e.broken; l++ {
		fmt.Fprintf(w, "  - %s\n", strings.TrimRight(strings.TrimPrefix(lines[l-1], e.indent), " \t"))
	}
	for l := e.broken + 1; l < e.End; l++ {
		code, _ := strings.CutPrefix(strings.TrimLeft(lines[l-1], " \t"), "//")
		fmt.Fprintf(w, "  + %s\n", strings.TrimPrefix(code, " "))
	}
	var tests []string
	for _, t := range e.Tests {
		tests = append(tests, t.String())
	}
	fmt.Fprintf(w, "\npredict: %s\n(the tests that will run: %s, in %s)\n", e.Predict, strings.Join(tests, ", "), e.Module)
	if !run {
		fmt.Fprintf(w, "\nwrite your prediction down, then: make break EX=%s RUN=1\n", e.ID)
		return nil
	}
	tmp, err := os.MkdirTemp("", "exercises-break-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	overlay, rename, err := writeOverlay(tmp, root, []*Exercise{e})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nrunning them with the variant in place (the tree is not changed)...\n")
	failed := 0
	for _, pkg := range e.Pkgs() {
		var names []string
		for _, t := range e.Tests {
			if t.Pkg == pkg {
				names = append(names, t.Name)
			}
		}
		g := &goTester{Dir: filepath.Join(root, e.Module), Overlay: overlay, Rename: rename, Timeout: opts.Timeout,
			TestTimeout: opts.TestTimeout, Race: opts.Race}
		res, err := g.run(pkg, names)
		if err != nil {
			return err
		}
		if res.BuildFailed {
			return fmt.Errorf("the variant does not compile:\n%s", res.BuildOutput)
		}
		for _, n := range names {
			r := res.Tests[n]
			status := map[string]string{testPass: "ok", testFail: "FAIL"}[r.Status]
			if status == "" {
				status = r.Status
			}
			fmt.Fprintf(w, "\n  %-4s %s\n", status, n)
			if r.Status == testFail {
				failed++
				for _, x := range excerpt(r.Output, 12) {
					fmt.Fprintf(w, "       | %s\n", x)
				}
			}
		}
	}
	fmt.Fprintf(w, "\nwith the variant in place, %d of %d tests fail. Was that your prediction? The chapter's section \"Break it\" says why.\n", failed, len(e.Tests))
	return nil
}
