package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Exercise is one marked region of the reference: a learner's task. In the
// source it reads
//
//	// exercise 01.2: find the segment that holds an offset
//	// hint: the segments are sorted by base offset; ...
//	// tests: TestReadFindsTheRightSegment, ./cluster.TestX
//	...the reference code, the region...
//	// end exercise
//
// and the markers stay in a learner's copy, around the panic that replaces
// the region, so that the tool can find the task again there.
type Exercise struct {
	Kind   Kind      // a fill-in exercise (a region of a body) or a build task (whole functions)
	ID     string    // "01.2": the stage, then the exercise's number in it; "01.A" for a build task
	Stage  string    // "01"
	Title  string    // what to write, one line
	Hint   string    // one line that helps without giving the answer away
	Tests  []TestRef // the tests that grade it
	Module string    // the stage's module folder, "stage01-log"
	File   string    // slash path from the repository root
	Line   int       // the opening marker's line, from 1
	End    int       // the "// end exercise" line
	Doc    string    // the stage's chapter, "docs/01-log.md", or "" when there is none
	Blank  bool      // the region is the exercise's panic: nobody has written it yet

	codeFrom   int        // the region's first line, after the header lines
	indent     string     // the opening marker's indentation, which the panic keeps
	funcs      []funcInfo // a build task's functions
	broken     int        // a break task's "// broken:" line
	blankFuncs int        // a build task's functions still its panic
	Predict    string     // a break task's question: what will the tests say with the variant in place?
}

// Kind tells the two tracks' tasks apart.
type Kind int

const (
	// Fill is a fill-in exercise: a few statements of one function body,
	// marked "// exercise NN.M: title" ... "// end exercise".
	Fill Kind = iota
	// Build is a build task: whole functions behind their signatures and
	// doc comments, marked "// build NN.X: title" ... "// end build"
	// around top-level declarations. Their bodies become panics; types,
	// constants and variables stay (they are the design the tests grade).
	Build
	// Break is a "break it" task: a region of reference code with a
	// broken variant below it, commented out, marked "// break NN.bM:
	// title", "// predict: question", "// tests: ...", the code, "//
	// broken:", the variant's lines as comments, "// end break". The
	// learner predicts what the tests will say with the variant in place,
	// then runs them (exercises break). No track blanks it.
	Break
)

func (k Kind) String() string {
	switch k {
	case Build:
		return "build"
	case Break:
		return "break"
	}
	return "exercise"
}

// Section is the chapter section that describes the kind's tasks.
func (k Kind) Section() string {
	switch k {
	case Build:
		return "Build it"
	case Break:
		return "Break it"
	}
	return "Your turn"
}

// TestRef names a test function and the package that holds it.
type TestRef struct {
	Pkg  string // the package's folder relative to the module: "./record", or "." for the module's root
	Name string // TestSomething
}

func (r TestRef) String() string { return r.Pkg + "." + r.Name }

// Where is the exercise's place for a person: file:line.
func (e *Exercise) Where() string { return fmt.Sprintf("%s:%d", e.File, e.Line) }

// Message is what the blanked region panics with: the task and where it is
// explained.
func (e *Exercise) Message() string {
	see := "see docs/, " + e.Kind.Section()
	if e.Doc != "" {
		see = "see " + e.Doc + ", " + e.Kind.Section()
	}
	return fmt.Sprintf("%s %s: %s (%s)", e.Kind, e.ID, e.Title, see)
}

// Pkgs are the packages holding the exercise's tests, in order of first mention.
func (e *Exercise) Pkgs() []string {
	var pkgs []string
	for _, t := range e.Tests {
		if !slices.Contains(pkgs, t.Pkg) {
			pkgs = append(pkgs, t.Pkg)
		}
	}
	return pkgs
}

var (
	// A line that means to open an exercise; openRe is the form it must have.
	openAttempt = regexp.MustCompile(`^//\s*exercise\s+\d`)
	openRe      = regexp.MustCompile(`^// exercise (\d\d)\.([1-9]\d*): (\S.*)$`)
	endAttempt  = regexp.MustCompile(`^//\s*end\s+exercise`)
	// A build task's markers: "// build 01.A: title" ... "// end build".
	buildAttempt = regexp.MustCompile(`^//\s*build\s+\d`)
	buildRe      = regexp.MustCompile(`^// build (\d\d)\.([A-Z]): (\S.*)$`)
	buildEnd     = regexp.MustCompile(`^//\s*end\s+build`)
	// A break task's markers: "// break 04.b1: title" ... "// end break".
	breakAttempt = regexp.MustCompile(`^//\s*break\s+\d`)
	breakRe      = regexp.MustCompile(`^// break (\d\d)\.(b[1-9]\d*): (\S.*)$`)
	breakEnd     = regexp.MustCompile(`^//\s*end\s+break`)
	predictRe    = regexp.MustCompile(`^// predict:\s*(.*)$`)
	hintRe       = regexp.MustCompile(`^// hint:\s*(.*)$`)
	testsRe      = regexp.MustCompile(`^// tests:\s*(.*)$`)
	testNameRe   = regexp.MustCompile(`^(Test|Example|Fuzz)[A-Za-z0-9_]*$`)
	stageDirRe   = regexp.MustCompile(`^stage(\d\d)-`)
	panicPrefix  = `panic("exercise `
	buildPrefix  = `panic("build `
)

// markerError is a malformed marker, named by file and line.
type markerError struct {
	file string
	line int
	msg  string
}

func (e *markerError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }

// parseExercises finds the tasks of one Go file, fill-in exercises and
// build tasks. file is its slash path from the repository root, module its
// stage folder (stageNN-...). Every malformed marker is reported, joined
// in one error.
func parseExercises(file, module string, src []byte) ([]*Exercise, error) {
	return parseMarkers(file, module, src, false)
}

// parseMarkers is parseExercises; lenient is for a learner's copy, where a
// region is the learner's to empty or to leave half-typed: an empty region
// and a file that does not parse are not errors there (the compiler says
// what is wrong), only malformed markers are.
func parseMarkers(file, module string, src []byte, lenient bool) ([]*Exercise, error) {
	var errs []error
	fail := func(line int, format string, args ...any) {
		errs = append(errs, &markerError{file, line, fmt.Sprintf(format, args...)})
	}
	moduleStages := stagesOfModule(module)
	lines := strings.Split(string(src), "\n")
	var exs []*Exercise
	open := map[Kind]*Exercise{} // a fill-in exercise may lie inside a build task
	for i := 0; i < len(lines); i++ {
		n := i + 1
		text := strings.TrimSpace(lines[i])
		kind, opening, closing, re, endText := Fill, openAttempt, endAttempt, openRe, "// end exercise"
		if buildAttempt.MatchString(text) || buildEnd.MatchString(text) {
			kind, opening, closing, re, endText = Build, buildAttempt, buildEnd, buildRe, "// end build"
		}
		if breakAttempt.MatchString(text) || breakEnd.MatchString(text) {
			kind, opening, closing, re, endText = Break, breakAttempt, breakEnd, breakRe, "// end break"
		}
		switch {
		case opening.MatchString(text):
			m := re.FindStringSubmatch(text)
			if m == nil {
				if kind == Build {
					fail(n, "malformed build marker %q: want // build NN.X: title (X a capital letter)", text)
				} else if kind == Break {
					fail(n, "malformed break marker %q: want // break NN.bM: title", text)
				} else {
					fail(n, "malformed exercise marker %q: want // exercise NN.M: title", text)
				}
				continue
			}
			if o := open[kind]; o != nil {
				fail(n, "%s %s.%s opens inside %s %s (opened at line %d): %ss do not nest", kind, m[1], m[2], kind, o.ID, o.Line, kind)
				continue
			}
			e := &Exercise{Kind: kind, ID: m[1] + "." + m[2], Stage: m[1], Title: strings.TrimSpace(m[3]), Module: module,
				File: file, Line: n, indent: lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]}
			if !slices.Contains(moduleStages, e.Stage) {
				fail(n, "%s %s belongs to stage %s, but %s is in %s", kind, e.ID, e.Stage, file, module)
			}
			// The header: a hint line and a tests line, in either order,
			// directly after the opening line.
			j := i + 1
			sawHint, sawTests := false, false
			for ; j < len(lines); j++ {
				h := strings.TrimSpace(lines[j])
				if m := hintRe.FindStringSubmatch(h); m != nil && !sawHint {
					sawHint, e.Hint = true, strings.TrimSpace(m[1])
				} else if m := predictRe.FindStringSubmatch(h); m != nil && kind == Break && e.Predict == "" {
					e.Predict = strings.TrimSpace(m[1])
				} else if m := testsRe.FindStringSubmatch(h); m != nil && !sawTests {
					sawTests = true
					tests, err := parseTests(m[1], module, file)
					if err != nil {
						fail(j+1, "%s %s: %v", kind, e.ID, err)
					}
					e.Tests = tests
				} else {
					break
				}
			}
			switch {
			case !sawTests:
				fail(n, "%s %s has no // tests: line after its opening line: name the tests that grade it", kind, e.ID)
			case len(e.Tests) == 0:
				fail(n, "%s %s: its // tests: line names no test", kind, e.ID)
			}
			if kind == Break && e.Predict == "" {
				fail(n, "break %s has no // predict: line after its opening line: ask what the learner expects", e.ID)
			}
			if kind == Fill && (!sawHint || e.Hint == "") {
				fail(n, "exercise %s has no // hint: line after its opening line", e.ID)
			}
			if sawHint && e.Hint == "" {
				fail(n, "%s %s: its // hint: line is empty", kind, e.ID)
			}
			e.codeFrom = j + 1
			i = j - 1
			open[kind] = e
		case closing.MatchString(text):
			if text != endText {
				fail(n, "malformed end marker %q: want %s", text, endText)
				continue
			}
			o := open[kind]
			if o == nil {
				fail(n, "%s without %s open", endText, map[Kind]string{Fill: "an exercise", Build: "a build task", Break: "a break task"}[kind])
				continue
			}
			o.End = n
			if o.codeFrom >= n && !lenient {
				fail(o.Line, "%s %s has no code between its header and its end", kind, o.ID)
			}
			if kind == Break {
				for k := o.codeFrom; k < n; k++ {
					if strings.TrimSpace(lines[k-1]) == "// broken:" {
						o.broken = k
						break
					}
				}
				if o.broken == 0 || o.broken == o.codeFrom || o.broken == n-1 {
					fail(o.Line, "break %s needs its code, a // broken: line, then the broken variant as comments", o.ID)
				}
			}
			exs = append(exs, o)
			delete(open, kind)
		}
	}
	for _, o := range open {
		fail(o.Line, "%s %s is never closed: no // end %s after it", o.Kind, o.ID, o.Kind)
	}
	for _, e := range exs {
		if e.Kind == Fill {
			e.Blank = isBlank(lines[e.codeFrom-1:e.End-1], e.ID)
		}
	}
	if len(exs) > 0 {
		errs = append(errs, checkPlacement(file, src, exs, lenient)...)
	}
	seen := map[string]*Exercise{}
	for _, e := range exs {
		if first, ok := seen[e.ID]; ok {
			fail(e.Line, "%s %s is marked twice: also at line %d", e.Kind, e.ID, first.Line)
		}
		seen[e.ID] = e
	}
	return exs, errors.Join(errs...)
}

// isBlank reports whether a fill-in region is nothing but the exercise's panic.
func isBlank(region []string, id string) bool {
	var code []string
	for _, l := range region {
		if t := strings.TrimSpace(l); t != "" {
			code = append(code, t)
		}
	}
	return len(code) == 1 && strings.HasPrefix(code[0], panicPrefix+id+":")
}

// parseTests reads a tests line: comma-separated test names, each in the
// marker's own package unless written as pkgpath.TestName, with pkgpath
// relative to the module ("./cluster.TestX").
func parseTests(list, module, file string) ([]TestRef, error) {
	ownPkg := pkgOf(file, module)
	var refs []TestRef
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		ref := TestRef{Pkg: ownPkg, Name: item}
		if i := strings.LastIndex(item, "."); i >= 0 {
			ref.Pkg, ref.Name = path.Clean(item[:i]), item[i+1:]
			if !strings.HasPrefix(item, "./") && ref.Pkg != "." {
				return nil, fmt.Errorf("test %q: write another package's test as ./path/to/pkg.TestName, relative to the module", item)
			}
			if ref.Pkg != "." {
				ref.Pkg = "./" + ref.Pkg
			}
		}
		if !testNameRe.MatchString(ref.Name) {
			return nil, fmt.Errorf("%q is not the name of a test function (TestX, ExampleX or FuzzX; no subtests)", item)
		}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

// pkgOf is the package folder of a file (a slash path from the root) as
// the module's go commands name it: "./record", or "." at the module's root.
func pkgOf(file, module string) string {
	if rel := strings.TrimPrefix(path.Dir(file), module); rel != "" {
		return "." + rel
	}
	return "."
}

// checkPlacement checks, with the parsed file, that each fill-in region
// lies in a function body and starts and ends in the same block, so that
// replacing it with one statement leaves Go; and that each build task
// holds whole top-level declarations (see placeBuild).
func checkPlacement(file string, src []byte, exs []*Exercise, lenient bool) []error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		if lenient {
			return nil // the learner's file, half-typed: its package does not build, which check shows
		}
		return []error{fmt.Errorf("%s: does not parse: %w", file, err)}
	}
	line := func(p token.Pos) int { return fset.Position(p).Line }
	type block struct{ from, to int } // the lines of { and }
	var bodies, blocks []block
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Body != nil {
				bodies = append(bodies, block{line(n.Body.Lbrace), line(n.Body.Rbrace)})
			}
		case *ast.FuncLit:
			bodies = append(bodies, block{line(n.Body.Lbrace), line(n.Body.Rbrace)})
		case *ast.BlockStmt:
			blocks = append(blocks, block{line(n.Lbrace), line(n.Rbrace)})
		}
		return true
	})
	innermost := func(l int, in []block) (block, bool) {
		best, found := block{}, false
		for _, b := range in {
			if b.from < l && l < b.to && (!found || b.to-b.from < best.to-best.from) {
				best, found = b, true
			}
		}
		return best, found
	}
	var errs []error
	for _, e := range exs {
		if e.Kind == Build {
			if perrs := placeBuild(file, fset, f, e); !lenient {
				errs = append(errs, perrs...)
			}
			continue
		}
		// A fill-in exercise or a break task: statements of one block.
		if lenient {
			continue // the learner's code may reshape the blocks around it
		}
		if _, ok := innermost(e.Line, bodies); !ok {
			errs = append(errs, &markerError{file, e.Line, fmt.Sprintf("%s %s is outside a function body: a region must be statements of a function", e.Kind, e.ID)})
			continue
		}
		if a, _ := innermost(e.Line, blocks); a != func() block { b, _ := innermost(e.End, blocks); return b }() {
			errs = append(errs, &markerError{file, e.End, fmt.Sprintf("%s %s ends in another block than it starts (line %d): a region must be whole statements of one block", e.Kind, e.ID, e.Line)})
		}
	}
	return errs
}

// findExercises finds every exercise in the stage modules (stageNN-*) under
// root, in the stages asked for (all when stages is empty). Exercises come
// sorted by stage and number. Malformed markers anywhere in those stages
// are an error naming each of them.
func findExercises(root string, stages []string) ([]*Exercise, error) {
	modules, err := stageModules(root, stages)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(filepath.Join(root, manifestName))
	lenient := statErr == nil // a learner's copy
	var all []*Exercise
	var errs []error
	for _, module := range modules {
		err := walkSources(filepath.Join(root, module), nil, func(p string, src []byte) error {
			if !strings.Contains(string(src), "// exercise ") && !strings.Contains(string(src), "// build ") && !strings.Contains(string(src), "// break ") {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			exs, perr := parseMarkers(filepath.ToSlash(rel), module, src, lenient)
			if perr != nil {
				errs = append(errs, perr)
			}
			all = append(all, exs...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	seen := map[string]*Exercise{}
	for _, e := range all {
		if first, ok := seen[e.ID]; ok && first.File != e.File {
			errs = append(errs, &markerError{e.File, e.Line, fmt.Sprintf("%s %s is marked twice: also at %s", e.Kind, e.ID, first.Where())})
		}
		seen[e.ID] = e
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, e := range all {
		for _, d := range docs {
			if strings.HasPrefix(filepath.Base(d), e.Stage+"-") {
				e.Doc = "docs/" + filepath.Base(d)
				break
			}
		}
	}
	slices.SortFunc(all, func(a, b *Exercise) int { return compareIDs(a.ID, b.ID) })
	return all, nil
}

// walkSources calls fn with the path and content of each Go source file of
// a module (not its tests), skipping testdata, vendor, hidden and
// underscore folders, and the folders named in skip.
func walkSources(dir string, skip []string, fn func(path string, src []byte) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != dir && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || slices.Contains(skip, name)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fn(p, src)
	})
}

// compareIDs orders "01.2" before "01.10", and a stage's build tasks
// (01.A, 01.B) after its fill-in exercises.
func compareIDs(a, b string) int {
	as, an, _ := strings.Cut(a, ".")
	bs, bn, _ := strings.Cut(b, ".")
	if c := strings.Compare(as, bs); c != 0 {
		return c
	}
	if la, lb := isLetter(an), isLetter(bn); la != lb {
		if la {
			return 1
		}
		return -1
	}
	if c := len(an) - len(bn); c != 0 {
		return c
	}
	return strings.Compare(an, bn)
}

// finalModule is the folder of the final broker, whose tasks belong to
// chapters 7 (the broker people deploy) and 8 (the cluster and its faults).
const finalModule = "final"

// finalStages are the chapters whose tasks live in finalModule.
var finalStages = []string{"07", "08"}

// stagesOfModule lists the stages whose tasks a module holds: its own for
// stageNN-*, chapters 7 and 8 for final.
func stagesOfModule(module string) []string {
	if m := stageDirRe.FindStringSubmatch(module); m != nil {
		return []string{m[1]}
	}
	if module == finalModule {
		return finalStages
	}
	return nil
}

// stageModules lists the task modules under root in order, the stage
// folders (stageNN-*) then final, keeping those of the stages asked for
// (all when stages is empty).
func stageModules(root string, stages []string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var modules, last []string
	found := map[string]bool{}
	for _, e := range entries {
		own := stagesOfModule(e.Name())
		if !e.IsDir() || own == nil {
			continue
		}
		keep := len(stages) == 0
		for _, st := range own {
			if slices.Contains(stages, st) {
				keep, found[st] = true, true
			}
		}
		switch {
		case !keep:
		case e.Name() == finalModule:
			last = append(last, e.Name())
		default:
			modules = append(modules, e.Name())
		}
	}
	for _, s := range stages {
		if !found[s] {
			return nil, fmt.Errorf("stage %s: no folder stage%s-* in %s (chapters 07 and 08: final)", s, s, root)
		}
	}
	return append(modules, last...), nil
}

// parseStages reads a -stages value: "01,02" (or "1,2").
func parseStages(v string) ([]string, error) {
	var stages []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if len(s) == 1 {
			s = "0" + s
		}
		if len(s) != 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
			return nil, fmt.Errorf("stage %q: want a stage number such as 01", s)
		}
		if !slices.Contains(stages, s) {
			stages = append(stages, s)
		}
	}
	return stages, nil
}

// funcInfo is one function of a build task: its body, between the braces.
type funcInfo struct {
	Body     span // bytes after { up to }
	FromLine int  // the { line
	ToLine   int  // the } line
}

// placeBuild checks a build task's region: its markers are outside every
// declaration, each top-level declaration is wholly inside it or wholly
// outside, and it holds at least one function with a body. It records the
// functions, and whether every body is the task's panic (Blank).
func placeBuild(file string, fset *token.FileSet, f *ast.File, e *Exercise) []error {
	line := func(p token.Pos) int { return fset.Position(p).Line }
	var errs []error
	fail := func(l int, format string, args ...any) {
		errs = append(errs, &markerError{file, l, fmt.Sprintf(format, args...)})
	}
	e.funcs, e.blankFuncs = nil, 0
	blank := true
	for _, d := range f.Decls {
		from, to := line(d.Pos()), line(d.End())
		inside := from > e.Line && to < e.End
		switch {
		case from <= e.Line && e.Line <= to:
			fail(e.Line, "build %s opens inside a declaration (lines %d-%d): a build task's markers go between top-level declarations", e.ID, from, to)
		case from <= e.End && e.End <= to:
			fail(e.End, "build %s ends inside a declaration (lines %d-%d): a build task's markers go between top-level declarations", e.ID, from, to)
		case inside:
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			body := span{fset.Position(fd.Body.Lbrace).Offset + 1, fset.Position(fd.Body.Rbrace).Offset}
			e.funcs = append(e.funcs, funcInfo{Body: body, FromLine: line(fd.Body.Lbrace), ToLine: line(fd.Body.Rbrace)})
			if isBuildPanic(fd.Body, e.ID) {
				e.blankFuncs++
			} else {
				blank = false
			}
		}
	}
	if len(e.funcs) == 0 {
		fail(e.Line, "build %s holds no function with a body: a build task is whole functions", e.ID)
	}
	e.Blank = blank && len(e.funcs) > 0
	return errs
}

// isBuildPanic reports whether a body is nothing but the build task's panic.
func isBuildPanic(body *ast.BlockStmt, id string) bool {
	if len(body.List) != 1 {
		return false
	}
	es, ok := body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return false
	}
	if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != "panic" {
		return false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && strings.HasPrefix(lit.Value, `"build `+id+":")
}

func isLetter(n string) bool { return n != "" && (n[0] >= 'A' && n[0] <= 'Z' || n[0] == 'b') }
