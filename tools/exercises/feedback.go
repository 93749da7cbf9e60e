package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// reportContext is what check's report needs beside one task.
type reportContext struct {
	results map[pkgKey]*pkgResult
	raced   map[pkgKey]bool              // the packages run with -race
	docs    map[pkgKey]map[string]string // a package's tests' doc comments, by test name
	all     []*Exercise                  // every task of the stages checked, to blame a hang on
	verbose bool
}

// stageOfModule is "01" for stage01-log, the first of final's chapters
// for final.
func stageOfModule(module string) string {
	if st := stagesOfModule(module); len(st) > 0 {
		return st[0]
	}
	return ""
}

// testDocs reads the doc comments of a package's test functions: a
// failing test says what it checks in its own words.
func testDocs(dir string) map[string]string {
	docs := map[string]string{}
	fset := token.NewFileSet()
	paths, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Doc == nil || fd.Recv != nil || !testNameRe.MatchString(fd.Name.Name) {
				continue
			}
			docs[fd.Name.Name] = strings.TrimSpace(fd.Doc.Text())
		}
	}
	return docs
}

// frameRe is a stack frame's place in a goroutine dump.
// go test's timeout panic writes "\t/path/f.go:12 +0x1d"; a SIGQUIT dump
// adds " fp=... sp=... pc=...".
var frameRe = regexp.MustCompile(`^\s*(\S+\.go):(\d+)(?:\s|$)`)

// hang is where a goroutine dump shows a task's code.
type hang struct {
	task  *Exercise
	where string
}

// hangingTask finds, in a test's output (a timeout's goroutine dump), the
// first frame inside a task's region: the task that hangs, which need not
// be the one whose test timed out.
func hangingTask(output []string, tasks []*Exercise) *hang {
	for _, chunk := range output {
		for _, l := range strings.Split(chunk, "\n") {
			m := frameRe.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			file := filepath.ToSlash(m[1])
			line, _ := strconv.Atoi(m[2])
			for _, e := range tasks {
				if (strings.HasSuffix(file, "/"+e.File) || file == e.File) && e.Line < line && line < e.End {
					return &hang{e, fmt.Sprintf("%s:%d", e.File, line)}
				}
			}
		}
	}
	return nil
}

// timedOut reports whether a test's output is go test's timeout panic, or
// the dump of a test stopped for running past -test-timeout.
func timedOut(output []string) bool {
	return slices.ContainsFunc(output, func(l string) bool {
		return strings.Contains(l, "panic: test timed out after") || strings.HasPrefix(l, "SIGQUIT: quit")
	})
}

// stageGate runs, once a stage's tasks all pass in a learner's copy, the
// whole stage module's tests and the next stage's: the learner's code
// must carry everything built on it, not only the tests that grade each
// task. A module that still holds blank tasks of this copy (the next
// stage, not begun; final's other chapter) is left for its own gate. It
// prints each package's verdict and reports whether all passed.
func stageGate(w io.Writer, root, module, track string, m *manifest, opts checkOptions) bool {
	modules, err := stageModules(root, nil)
	if err != nil {
		fmt.Fprintf(w, "stage gate: %v\n", err)
		return false
	}
	i := slices.Index(modules, module)
	gate := modules[i:min(i+2, len(modules))]
	fmt.Fprintf(w, "\nstage gate: every task of %s passes; now the whole of %s on your code\n", module, strings.Join(gate, " and "))
	ok := true
	for _, mod := range gate {
		if blank := blankTasksOf(root, mod, track, m); len(blank) > 0 {
			fmt.Fprintf(w, "  %s: not yet: tasks %s are still blank in this copy (its tests run at their own gate)\n", mod, strings.Join(blank, ", "))
			continue
		}
		race := opts.Race
		if !opts.RaceSet {
			race = slices.Contains(raceStages, stageOfModule(mod)) && raceAvailable()
		}
		args := []string{"test", "-count=1", "-timeout", "30m"}
		if race {
			args = append(args, "-race")
		}
		args = append(args, "./...")
		fmt.Fprintf(w, "  %s: go %s\n", mod, strings.Join(args, " "))
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(root, mod)
		out, err := cmd.CombinedOutput()
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "--- FAIL") || strings.HasPrefix(l, "panic: ") {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
		if err != nil {
			ok = false
			fmt.Fprintf(w, "  %s: FAIL (cd %s && go %s for the whole output)\n", mod, mod, strings.Join(args, " "))
		} else {
			fmt.Fprintf(w, "  %s: every package passes\n", mod)
		}
	}
	if ok {
		fmt.Fprintf(w, "stage gate passed: %s is done\n", module)
	}
	return ok
}

// blankTasksOf lists the tasks of module that this copy blanked and that
// are still blank.
func blankTasksOf(root, module, track string, m *manifest) []string {
	exs, err := findExercises(root, stagesOfModule(module))
	if err != nil {
		return nil
	}
	var blank []string
	for _, e := range forTrack(exs, track) {
		if e.Module == module && (e.Blank || e.blankFuncs > 0) && (m == nil || slices.Contains(m.Exercises, e.ID)) {
			blank = append(blank, e.ID)
		}
	}
	return blank
}

// raceAvailable reports whether go test -race can build here: the race
// detector needs cgo and a C compiler.
func raceAvailable() bool {
	out, err := exec.Command("go", "env", "CGO_ENABLED", "CC").Output()
	if err != nil {
		return false
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || f[0] != "1" {
		return false
	}
	_, err = exec.LookPath(f[1])
	return err == nil
}
