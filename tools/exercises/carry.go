package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// carryForward brings a learner's earlier work into a new copy: every task
// the earlier copy blanked and the learner has since written replaces the
// same task's region in the new copy (the reference's code there, or its
// blank). Imports follow the code: those the learner's code needs are
// added, those it no longer needs dropped. It returns the ids carried.
func carryForward(w io.Writer, dir, from string) ([]string, error) {
	from, err := filepath.Abs(from)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(from, manifestName))
	if err != nil {
		return nil, fmt.Errorf("-from %s: not a learner's copy (no %s): %w", from, manifestName, err)
	}
	var old manifest
	if err := json.Unmarshal(data, &old); err != nil {
		return nil, fmt.Errorf("-from %s: %s: %w", from, manifestName, err)
	}
	oldExs, err := findExercises(from, old.Stages)
	if err != nil {
		return nil, fmt.Errorf("-from %s: %w", from, err)
	}
	newExs, err := findExercises(dir, nil)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Exercise{}
	for _, e := range newExs {
		byID[e.ID] = e
	}
	// The learner's tasks: blanked in that copy, written since.
	var carry []*Exercise
	for _, e := range oldExs {
		if !slices.Contains(old.Exercises, e.ID) {
			continue
		}
		if e.Blank {
			fmt.Fprintf(w, "not carried: %s %s is still blank in %s\n", e.Kind, e.ID, from)
			continue
		}
		if n := byID[e.ID]; n == nil || n.Kind != e.Kind || n.File != e.File {
			fmt.Fprintf(w, "not carried: %s %s (%s) is not in this copy at the same place: bring it by hand\n", e.Kind, e.ID, e.Where())
			continue
		}
		carry = append(carry, e)
	}
	var carried []string
	for file, exs := range byFile(carry) {
		ids := make([]string, len(exs))
		for i, e := range exs {
			ids[i] = e.ID
		}
		oldSrc, err := os.ReadFile(filepath.Join(from, filepath.FromSlash(file)))
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, filepath.FromSlash(file))
		newSrc, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		// The new file's tasks, found again in it: positions shift.
		fresh, err := parseMarkers(file, exs[0].Module, newSrc, true)
		if err != nil {
			return nil, err
		}
		out, err := spliceRegions(file, oldSrc, newSrc, exs, fresh)
		if err != nil {
			fmt.Fprintf(w, "not carried: %s (%s): %v\n", strings.Join(ids, ", "), file, err)
			continue
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return nil, err
		}
		carried = append(carried, ids...)
	}
	for _, f := range changedOutsideTasks(from, carry) {
		fmt.Fprintf(w, "not carried: %s, changed outside any task's region: bring it by hand if your code needs it\n", f)
	}
	slices.SortFunc(carried, compareIDs)
	if len(carried) > 0 {
		fmt.Fprintf(w, "carried forward from %s: %s\n", from, strings.Join(carried, ", "))
	}
	return carried, nil
}

// spliceRegions puts the regions of exs (parsed from oldSrc) in place of
// the same tasks' regions of newSrc (parsed as fresh), then mends imports.
func spliceRegions(file string, oldSrc, newSrc []byte, exs, fresh []*Exercise) ([]byte, error) {
	oldLines := strings.SplitAfter(string(oldSrc), "\n")
	newLines := strings.SplitAfter(string(newSrc), "\n")
	targets := slices.Clone(fresh)
	slices.SortFunc(targets, func(a, b *Exercise) int { return b.Line - a.Line })
	for _, t := range targets {
		i := slices.IndexFunc(exs, func(e *Exercise) bool { return e.ID == t.ID })
		if i < 0 {
			continue
		}
		e := exs[i]
		region := slices.Clone(oldLines[e.codeFrom-1 : e.End-1])
		newLines = slices.Replace(newLines, t.codeFrom-1, t.End-1, region...)
	}
	out := []byte(strings.Join(newLines, ""))
	out, err := addImports(file, oldSrc, out)
	if err != nil {
		return nil, err
	}
	if out, err = pruneImports(file, newSrc, out, false); err != nil {
		return nil, err
	}
	formatted, err := format.Source(out)
	if err != nil {
		return nil, fmt.Errorf("carrying into %s: the result is not Go: %w", file, err)
	}
	return formatted, nil
}

// addImports adds to src the imports of donor that src now uses (as pkg.X)
// and does not import.
func addImports(file string, donor, src []byte) ([]byte, error) {
	d, err := parser.ParseFile(token.NewFileSet(), file, donor, parser.ImportsOnly)
	if err != nil {
		return nil, fmt.Errorf("%s (the earlier copy): %w", file, err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("%s with the carried code: %w", file, err)
	}
	have := map[string]bool{}
	for _, is := range f.Imports {
		have[importName(is)] = true
	}
	used := selectorRoots(f)
	var add []string
	for _, is := range d.Imports {
		name := importName(is)
		if name == "" || have[name] || !used[name] || declared(f, name) {
			continue
		}
		spec := is.Path.Value
		if is.Name != nil {
			spec = is.Name.Name + " " + spec
		}
		add = append(add, spec)
		have[name] = true
	}
	if len(add) == 0 {
		return src, nil
	}
	// Into the first parenthesized import declaration, or a new one
	// after the package clause.
	for _, decl := range f.Decls {
		if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.IMPORT && gd.Rparen.IsValid() {
			at := fset.Position(gd.Rparen).Offset
			text := "\t" + strings.Join(add, "\n\t") + "\n"
			return slices.Insert(slices.Clone(src), at, []byte(text)...), nil
		}
	}
	at := fset.Position(f.Name.End()).Offset
	text := "\n\nimport (\n\t" + strings.Join(add, "\n\t") + "\n)\n"
	return slices.Insert(slices.Clone(src), at, []byte(text)...), nil
}

// declared reports whether a file declares name at its top level, which
// then is no package's.
func declared(f *ast.File, name string) bool {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == name {
				return true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name == name {
							return true
						}
					}
				case *ast.TypeSpec:
					if s.Name.Name == name {
						return true
					}
				}
			}
		}
	}
	return false
}

// changedOutsideTasks lists the Go files of a learner's copy that changed
// since its baseline commit other than inside the regions of carried:
// files the learner added, and edits outside the regions (a helper
// written after a task's end marker). It needs the copy's git history;
// without it, it says nothing.
func changedOutsideTasks(from string, carried []*Exercise) []string {
	root, err := exec.Command("git", "-C", from, "rev-list", "--max-parents=0", "HEAD").Output()
	if err != nil {
		return nil
	}
	base := strings.TrimSpace(strings.Split(string(root), "\n")[0])
	changed, err := exec.Command("git", "-C", from, "diff", "--name-only", base).Output()
	if err != nil {
		return nil
	}
	untracked, _ := exec.Command("git", "-C", from, "ls-files", "--others", "--exclude-standard").Output()
	byFileExs := byFile(carried)
	var out []string
	for _, f := range strings.Fields(string(changed) + " " + string(untracked)) {
		if !strings.HasSuffix(f, ".go") || slices.Contains(out, f) {
			continue
		}
		exs, ok := byFileExs[f]
		if !ok {
			out = append(out, f)
			continue
		}
		now, err1 := os.ReadFile(filepath.Join(from, filepath.FromSlash(f)))
		then, err2 := exec.Command("git", "-C", from, "show", base+":"+f).Output()
		if err1 != nil || err2 != nil {
			continue
		}
		thenExs, err := parseMarkers(f, exs[0].Module, then, true)
		if err != nil {
			continue
		}
		if outsideRegions(now, exs) != outsideRegions(then, thenExs) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// outsideRegions is src without the code of the regions of exs (its
// markers kept) and without its imports, which carrying mends itself.
func outsideRegions(src []byte, exs []*Exercise) string {
	var imports [][2]int // line spans of import declarations
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", src, parser.ImportsOnly); err == nil {
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
				imports = append(imports, [2]int{fset.Position(gd.Pos()).Line, fset.Position(gd.End()).Line})
			}
		}
	}
	lines := strings.Split(string(src), "\n")
	var keep []string
	for i, l := range lines {
		n := i + 1
		inside := false
		for _, e := range exs {
			inside = inside || e.codeFrom <= n && n < e.End
		}
		for _, span := range imports {
			inside = inside || span[0] <= n && n <= span[1]
		}
		if !inside && strings.TrimSpace(l) != "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
