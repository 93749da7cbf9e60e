package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// blankFile returns src with the regions of exs (all in this file) replaced
// by their panics, the markers kept. Imports that only the regions used are
// dropped, since Go refuses an unused import; everything else a region
// leaves unused (a variable declared before it) is the exercise author's to
// fix, and verify says so. The result is gofmt'ed.
func blankFile(file string, src []byte, exs []*Exercise) ([]byte, error) {
	return blank(file, src, exs, false)
}

// blankKeepingLines is blankFile for go's -overlay: every line that stays
// keeps its number (removed lines become empty ones, and the result is not
// gofmt'ed), so that the compiler's messages point into the reference.
func blankKeepingLines(file string, src []byte, exs []*Exercise) ([]byte, error) {
	return blank(file, src, exs, true)
}

func blank(file string, src []byte, exs []*Exercise, keepLines bool) ([]byte, error) {
	// Every change is a byte range and its replacement, made from the end
	// of the file so that earlier offsets stay true.
	lineStart := []int{0} // lineStart[i] is the offset of line i+1
	for i, c := range src {
		if c == '\n' {
			lineStart = append(lineStart, i+1)
		}
	}
	var edits []edit
	for _, e := range exs {
		if e.File != file {
			return nil, fmt.Errorf("blank %s: %s %s is in %s", file, e.Kind, e.ID, e.File)
		}
		stmt := "panic(" + strconv.Quote(e.Message()) + ")"
		if e.Kind == Build {
			for _, fn := range e.funcs {
				body := fn.Body
				breaks := bytes.Count(src[body.from:body.to], []byte{'\n'})
				with := " " + stmt + " "
				if breaks > 0 {
					with = "\n\t" + stmt + "\n"
					if keepLines {
						with += strings.Repeat("\n", max(0, breaks-2))
					}
				}
				edits = append(edits, edit{body, with})
			}
			continue
		}
		if e.Kind == Break {
			edits = append(edits, breakEdits(e, src, lineStart)...)
			continue
		}
		if insideBuild(e, exs) {
			continue // its function's body goes as a whole
		}
		with := e.indent + stmt + "\n"
		if keepLines {
			with += strings.Repeat("\n", e.End-e.codeFrom-1)
		}
		edits = append(edits, edit{span{lineStart[e.codeFrom-1], lineStart[e.End-1]}, with})
	}
	slices.SortFunc(edits, func(a, b edit) int { return b.from - a.from })
	out := slices.Clone(src)
	for _, ed := range edits {
		out = slices.Replace(out, ed.from, ed.to, []byte(ed.with)...)
	}
	out, err := pruneImports(file, src, out, keepLines)
	if err != nil {
		return nil, err
	}
	if keepLines {
		return out, nil
	}
	formatted, err := format.Source(out)
	if err != nil {
		return nil, fmt.Errorf("blank %s: the result is not Go: %w", file, err)
	}
	return formatted, nil
}

// breakEdits puts a break task's variant in place: the reference's lines
// become empty ones and the commented variant's lines code, so that every
// line keeps its number.
func breakEdits(e *Exercise, src []byte, lineStart []int) []edit {
	var edits []edit
	for l := e.codeFrom; l < e.broken; l++ {
		edits = append(edits, edit{span{lineStart[l-1], lineStart[l] - 1}, ""})
	}
	for l := e.broken + 1; l < e.End; l++ {
		line := string(src[lineStart[l-1] : lineStart[l]-1])
		t := strings.TrimLeft(line, " \t")
		code, ok := strings.CutPrefix(t, "//")
		if !ok {
			continue // a variant's line must be a comment; verify's compile says so otherwise
		}
		code = strings.TrimPrefix(code, " ")
		edits = append(edits, edit{span{lineStart[l-1], lineStart[l] - 1}, e.indent + code})
	}
	return edits
}

// edit is a change of blank: a byte range and its replacement.
type edit struct {
	span
	with string
}

// insideBuild reports whether a fill-in exercise lies in one of the build
// tasks among exs, whose blanking takes its function's body whole.
func insideBuild(e *Exercise, exs []*Exercise) bool {
	for _, b := range exs {
		if b.Kind == Build && b.File == e.File && b.Line < e.Line && e.End < b.End {
			return true
		}
	}
	return false
}

// pruneImports drops from blanked the imports that orig used and blanked no
// longer does. A package is used through selectors (pkg.Name); an import
// whose name cannot be told from its path with confidence, or that orig
// did not visibly use, is left alone, so the worst case is an unused import
// that verify reports, never a needed one removed.
// With keepLines, the lines removed become empty ones.
func pruneImports(file string, orig, blanked []byte, keepLines bool) ([]byte, error) {
	before, err := parser.ParseFile(token.NewFileSet(), file, orig, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("blank %s: %w", file, err)
	}
	fset := token.NewFileSet()
	after, err := parser.ParseFile(fset, file, blanked, parser.SkipObjectResolution|parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("blank %s: the result does not parse: %w", file, err)
	}
	usedBefore, usedAfter := selectorRoots(before), selectorRoots(after)
	var cuts []span
	lineCut := func(from, to token.Pos) span {
		return wholeLines(blanked, fset.Position(from).Offset, fset.Position(to).Offset)
	}
	for _, d := range after.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		var drop []*ast.ImportSpec
		for _, s := range gd.Specs {
			is := s.(*ast.ImportSpec)
			if name := importName(is); name != "" && usedBefore[name] && !usedAfter[name] {
				drop = append(drop, is)
			}
		}
		switch {
		case len(drop) == 0:
		case len(drop) == len(gd.Specs):
			from := gd.Pos()
			if gd.Doc != nil {
				from = gd.Doc.Pos()
			}
			cuts = append(cuts, lineCut(from, gd.End()))
		default:
			for _, is := range drop {
				from, to := is.Pos(), is.End()
				if is.Doc != nil {
					from = is.Doc.Pos()
				}
				if is.Comment != nil {
					to = is.Comment.End()
				}
				cuts = append(cuts, lineCut(from, to))
			}
		}
	}
	out := slices.Clone(blanked)
	slices.SortFunc(cuts, func(a, b span) int { return b.from - a.from })
	for _, c := range cuts {
		var keep []byte
		if keepLines {
			keep = bytes.Repeat([]byte{'\n'}, bytes.Count(out[c.from:c.to], []byte{'\n'}))
		}
		out = slices.Replace(out, c.from, c.to, keep...)
	}
	return out, nil
}

// span is a byte range [from, to) of a file.
type span struct{ from, to int }

// wholeLines widens [from, to) to whole lines when only blanks share them,
// so that a dropped import takes its line with it.
func wholeLines(src []byte, from, to int) span {
	f := from
	for f > 0 && (src[f-1] == ' ' || src[f-1] == '\t') {
		f--
	}
	t := to
	for t < len(src) && (src[t] == ' ' || src[t] == '\t') {
		t++
	}
	if (f == 0 || src[f-1] == '\n') && (t == len(src) || src[t] == '\n') {
		from = f
		to = min(t+1, len(src))
	}
	return span{from, to}
}

// selectorRoots are the names used as x in x.y: every package a file uses,
// and some variables besides (which can only keep an import, never drop one).
func selectorRoots(f *ast.File) map[string]bool {
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok {
				names[id.Name] = true
			}
		}
		return true
	})
	return names
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// importName is the name a file uses for an import: its explicit name, or
// the name guessed from the path's last element ("math/rand/v2" is rand,
// "gopkg.in/yaml.v3" is yaml). "" for blank and dot imports.
func importName(is *ast.ImportSpec) string {
	if is.Name != nil {
		if is.Name.Name == "_" || is.Name.Name == "." {
			return ""
		}
		return is.Name.Name
	}
	p, err := strconv.Unquote(is.Path.Value)
	if err != nil {
		return ""
	}
	elems := strings.Split(p, "/")
	name := elems[len(elems)-1]
	if majorVersion.MatchString(name) && len(elems) > 1 {
		name = elems[len(elems)-2]
	}
	if i := strings.Index(name, ".v"); i > 0 {
		name = name[:i]
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "go-"), "-go")
	return name
}
