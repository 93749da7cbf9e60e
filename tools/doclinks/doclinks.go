// Package doclinks keeps the book's links true. Every relative link and
// image in the repository's markdown must name a file or directory that
// exists, and every #fragment into a markdown file must name one of its
// headings by the anchor GitHub gives it. External links (any URL with a
// scheme: http:, https:, mailto:) are not followed: the checks need no
// network.
//
// The parser reads the markdown the book is written in, not all of
// CommonMark: fenced code blocks (``` and ~~~), inline code spans and HTML
// comments hide what they hold; inline links and images, [text](target),
// and reference definitions, [label]: target, are checked; ATX and setext
// headings and HTML id and name attributes give anchors. Indented code
// blocks are not recognised: the book indents list items, not code.
package doclinks

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// generated holds the folders whose markdown a program writes: their links
// are not checked (a fix belongs in the program), though links into them are.
var generated = []string{
	"docs/reports/", // fault-suite reports, written by final/faults (make faults)
}

// Link is one link destination in a markdown file.
type Link struct {
	Line   int    // the line the destination starts on, from 1
	Target string // as written, backslash escapes removed
}

// Problem is a link that does not resolve, or a file the checks cannot read
// whole (a code fence never closed hides every link after it).
type Problem struct {
	File   string // slash path from the repository root
	Line   int    // from 1
	Target string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s (%s)", p.File, p.Line, p.Target, p.Reason)
}

// Result is what Check found.
type Result struct {
	Files    []string  // the markdown files whose links were checked, slash paths
	Links    int       // how many links they hold, external ones included
	Problems []Problem // in file order, then line order
}

// Check checks the links of every markdown file of the repository at root
// but the generated ones.
func Check(root string) (Result, error) {
	var res Result
	files, err := MarkdownFiles(root)
	if err != nil {
		return res, err
	}
	c := &checker{root: root, anchors: map[string]map[string]bool{}, dirs: map[string][]string{}}
	for _, file := range files {
		if isGenerated(file) {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked, but deleted in the working tree
		}
		if err != nil {
			return res, err
		}
		d := parse(src)
		res.Files = append(res.Files, file)
		if d.unclosedFence > 0 {
			res.Problems = append(res.Problems, Problem{file, d.unclosedFence, "```",
				"a code fence opened here is never closed: the rest of the file is code, its links unchecked"})
		}
		for _, l := range d.links {
			res.Links++
			if reason := c.check(file, l.Target); reason != "" {
				res.Problems = append(res.Problems, Problem{file, l.Line, l.Target, reason})
			}
		}
	}
	return res, nil
}

func isGenerated(file string) bool {
	for _, dir := range generated {
		if strings.HasPrefix(file, dir) {
			return true
		}
	}
	return false
}

// MarkdownFiles lists the markdown files of the repository at root, slash
// paths from it, sorted: those git tracks, or, when git is missing or root
// is not the top of a git repository, every .md file outside .git.
func MarkdownFiles(root string) ([]string, error) {
	if files, ok := gitMarkdownFiles(root); ok {
		return files, nil
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	slices.Sort(files)
	return files, err
}

// gitMarkdownFiles asks git. It answers only for the top of a repository:
// in a folder of a larger one, ls-files would list none of its untracked
// files and say nothing of it.
func gitMarkdownFiles(root string) ([]string, bool) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, false
	}
	top, err := exec.Command(git, "-C", root, "rev-parse", "--show-toplevel").Output()
	if err != nil || !sameDir(strings.TrimSpace(string(top)), root) {
		return nil, false
	}
	out, err := exec.Command(git, "-C", root, "ls-files", "-z", "--", "*.md").Output()
	if err != nil {
		return nil, false
	}
	var files []string
	for f := range bytes.SplitSeq(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	slices.Sort(files)
	return files, true
}

func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// checker resolves links, remembering what it has read.
type checker struct {
	root    string
	anchors map[string]map[string]bool // a markdown file's anchors, by slash path
	dirs    map[string][]string        // a folder's entry names, by slash path
}

// check says why target, a link in file, does not resolve, or "" when it
// does.
func (c *checker) check(file, target string) string {
	if target == "" {
		return "empty target"
	}
	if isExternal(target) {
		return ""
	}
	p, frag, hasFrag := strings.Cut(target, "#")
	p, _, _ = strings.Cut(p, "?")
	p, err := url.PathUnescape(p)
	if err != nil {
		return "bad percent-encoding"
	}
	var rel string
	switch {
	case p == "":
		rel = file
	case strings.HasPrefix(p, "/"): // GitHub: from the repository's root
		rel = path.Clean(strings.TrimLeft(p, "/"))
	default:
		rel = path.Join(path.Dir(file), p)
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "outside the repository"
	}
	isDir, reason := c.stat(rel)
	if reason != "" {
		return reason
	}
	if !hasFrag || frag == "" {
		return ""
	}
	md := rel
	if isDir {
		// GitHub shows a folder's README.md under its listing, anchors and all.
		md = path.Join(rel, "README.md")
		if _, reason := c.stat(md); reason != "" {
			return "a #fragment into a folder without a README.md"
		}
	}
	if !isMarkdown(md) {
		return "" // #L12 into a .go file: GitHub's line anchors, not checked
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	anchors := c.anchorsOf(md)
	if anchors[frag] {
		return ""
	}
	where := md
	if md == file {
		where = "this file"
	}
	reason = fmt.Sprintf("no heading in %s has the anchor #%s", where, frag)
	if near := nearest(frag, anchors); near != "" {
		reason += "; nearest: #" + near
	}
	return reason
}

// isExternal reports whether target is a URL with a scheme (http:,
// https:, mailto:) or a network path (//host/...).
func isExternal(target string) bool {
	if strings.HasPrefix(target, "//") {
		return true
	}
	scheme, _, ok := strings.Cut(target, ":")
	return ok && schemeRE.MatchString(scheme)
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

func isMarkdown(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == ".md" || ext == ".markdown"
}

// stat says whether rel, a clean slash path from the root, is a folder, or
// why it cannot be found. The name must match in case: a file system that
// ignores case (macOS, Windows) would find what GitHub does not.
func (c *checker) stat(rel string) (isDir bool, reason string) {
	fi, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(rel)))
	if err != nil {
		return false, "no such file or folder"
	}
	if rel == "." {
		return true, ""
	}
	dir := "."
	for name := range strings.SplitSeq(rel, "/") {
		names := c.list(dir)
		if !slices.Contains(names, name) {
			for _, n := range names {
				if strings.EqualFold(n, name) {
					return false, fmt.Sprintf("no such file or folder: %s is spelt %s", name, n)
				}
			}
			if names != nil {
				return false, "no such file or folder"
			}
		}
		dir = path.Join(dir, name)
	}
	return fi.IsDir(), ""
}

// list is the entry names of dir, a slash path from the root, or nil when
// it cannot be read.
func (c *checker) list(dir string) []string {
	if names, ok := c.dirs[dir]; ok {
		return names
	}
	entries, err := os.ReadDir(filepath.Join(c.root, filepath.FromSlash(dir)))
	var names []string
	if err == nil {
		names = make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
	}
	c.dirs[dir] = names
	return names
}

func (c *checker) anchorsOf(md string) map[string]bool {
	if a, ok := c.anchors[md]; ok {
		return a
	}
	a := map[string]bool{}
	if src, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(md))); err == nil {
		for _, anchor := range Anchors(src) {
			a[anchor] = true
		}
	}
	c.anchors[md] = a
	return a
}

// nearest is the anchor frag most likely meant, or "": one that holds it
// or that it holds (a heading renamed by a word or a number), else the
// closest in edit distance when close enough.
func nearest(frag string, anchors map[string]bool) string {
	best, bestDist := "", -1
	for a := range anchors {
		if a == "" || !strings.Contains(a, frag) && !strings.Contains(frag, a) {
			continue
		}
		d := abs(len(a) - len(frag))
		if bestDist < 0 || d < bestDist || d == bestDist && a < best {
			best, bestDist = a, d
		}
	}
	if best != "" {
		return best
	}
	bestDist = utf8.RuneCountInString(frag)/3 + 2
	for a := range anchors {
		if d := editDistance(frag, a); d < bestDist || d == bestDist && best != "" && a < best {
			best, bestDist = a, d
		}
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// ParseLinks lists the link destinations of a markdown file: inline links
// and images, and reference definitions, outside code.
func ParseLinks(src []byte) []Link {
	return parse(src).links
}

// doc is one markdown file, read for its links and headings.
type doc struct {
	text          []byte   // the source with fenced code blanked: newlines kept, every other byte a space
	lines         []int    // the offset in text where each line starts
	links         []Link   // in the order of their offsets
	unclosedFence int      // the line of a code fence that never closes, or 0
	headings      []string // each heading's raw text, in order
}

func parse(src []byte) *doc {
	d := &doc{}
	d.blankFences(src)
	for i := range d.text {
		if i == 0 || d.text[i-1] == '\n' {
			d.lines = append(d.lines, i)
		}
	}
	d.findHeadings()

	// What follows no longer reads code: blank it.
	text := bytes.Clone(d.text)
	blankCodeSpans(text)
	blankComments(text)

	type at struct {
		off    int
		target string
	}
	var found []at
	for _, s := range inlineLinks(text) {
		found = append(found, at{s.destStart, s.dest})
	}
	for _, m := range refDefRE.FindAllSubmatchIndex(text, -1) {
		label := string(text[m[2]:m[3]])
		if strings.HasPrefix(label, "^") {
			continue // a footnote, not a link
		}
		dest := string(text[m[4]:m[5]])
		if strings.HasPrefix(dest, "<") {
			dest = strings.TrimSuffix(dest[1:], ">")
		}
		found = append(found, at{m[4], unescape(dest)})
	}
	slices.SortStableFunc(found, func(a, b at) int { return a.off - b.off })
	for _, f := range found {
		d.links = append(d.links, Link{d.lineOf(f.off), f.target})
	}
	return d
}

// refDefRE matches a reference definition, [label]: target, at a line's
// start.
var refDefRE = regexp.MustCompile(`(?m)^ {0,3}\[((?:[^\]\\\n]|\\.)+)\]:[ \t]*(<[^>\n]*>|[^\s<]\S*)`)

func (d *doc) lineOf(off int) int {
	i, found := slices.BinarySearch(d.lines, off)
	if found {
		return i + 1
	}
	return i
}

// blankFences sets d.text to src with every fenced code block, its fences
// included, blanked. A fence may be indented (a list item's code); it
// closes with a line of the same character, at least as long, and nothing
// else.
func (d *doc) blankFences(src []byte) {
	d.text = bytes.Clone(src)
	var fence string // the open fence's characters, or ""
	for n, line := range bytes.SplitAfter(d.text, []byte("\n")) {
		trimmed := strings.TrimSpace(string(line))
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			blank(line)
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			run := len(trimmed) - len(strings.TrimLeft(trimmed, trimmed[:1]))
			if trimmed[0] == '`' && strings.Contains(trimmed[run:], "`") {
				break // ```a``` is inline code, not a fence
			}
			fence = trimmed[:run]
			d.unclosedFence = n + 1
			blank(line)
		}
	}
	if fence == "" {
		d.unclosedFence = 0
	}
}

// blank turns every byte of b but newlines into a space: offsets and line
// numbers stay.
func blank(b []byte) {
	for i, c := range b {
		if c != '\n' {
			b[i] = ' '
		}
	}
}

// blankCodeSpans blanks every inline code span of text: a run of backticks
// up to the next run of the same length, within a paragraph. A run with no
// match is literal backticks.
func blankCodeSpans(text []byte) {
	for i := 0; i < len(text); {
		switch text[i] {
		case '\\':
			i += 2 // \` is a literal backtick
			continue
		case '`':
		default:
			i++
			continue
		}
		n := backtickRun(text, i)
		if end := closingRun(text, i+n, n); end >= 0 {
			blank(text[i : end+n])
			i = end + n
		} else {
			i += n
		}
	}
}

func backtickRun(text []byte, i int) int {
	n := 0
	for i+n < len(text) && text[i+n] == '`' {
		n++
	}
	return n
}

// closingRun is the offset of the first run of exactly n backticks at or
// after from, before the paragraph ends, or -1.
func closingRun(text []byte, from, n int) int {
	for j := from; j < len(text); {
		switch {
		case text[j] == '`':
			m := backtickRun(text, j)
			if m == n {
				return j
			}
			j += m
		case text[j] == '\n' && blankLineAfter(text, j):
			return -1
		default:
			j++
		}
	}
	return -1
}

// blankLineAfter reports whether the line after the newline at i holds
// nothing but spaces and tabs, or there is none.
func blankLineAfter(text []byte, i int) bool {
	for j := i + 1; j < len(text) && text[j] != '\n'; j++ {
		if text[j] != ' ' && text[j] != '\t' && text[j] != '\r' {
			return false
		}
	}
	return true
}

// blankComments blanks HTML comments: what they hold is not shown.
func blankComments(text []byte) {
	for {
		i := bytes.Index(text, []byte("<!--"))
		if i < 0 {
			return
		}
		j := bytes.Index(text[i+4:], []byte("-->"))
		if j < 0 {
			return
		}
		blank(text[i : i+4+j+3])
		text = text[i+4+j+3:]
	}
}

// span is an inline link or image.
type span struct {
	start, end         int // from its [ (or the ! of an image) to after its )
	textStart, textEnd int // its text, inside the brackets
	destStart          int // where its destination starts
	dest               string
	image              bool
}

// inlineLinks finds the inline links and images of text, code already
// blanked, in the order they open. A link inside another's text (an image
// in a link) is found too.
func inlineLinks(text []byte) []span {
	var spans []span
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++ // an escaped character opens nothing
			continue
		case '[':
		default:
			continue
		}
		close := closingBracket(text, i+1)
		if close < 0 || close+1 >= len(text) || text[close+1] != '(' {
			continue
		}
		dest, destStart, end, ok := destination(text, close+2)
		if !ok {
			continue
		}
		s := span{start: i, end: end, textStart: i + 1, textEnd: close, destStart: destStart, dest: dest}
		if i > 0 && text[i-1] == '!' && (i < 2 || text[i-2] != '\\') {
			s.start, s.image = i-1, true
		}
		spans = append(spans, s)
	}
	return spans
}

// closingBracket is the offset of the ] that closes a [ just before from,
// brackets nesting, within a paragraph, or -1.
func closingBracket(text []byte, from int) int {
	depth := 0
	for j := from; j < len(text); j++ {
		switch text[j] {
		case '\\':
			j++
		case '[':
			depth++
		case ']':
			if depth == 0 {
				return j
			}
			depth--
		case '\n':
			if blankLineAfter(text, j) {
				return -1
			}
		}
	}
	return -1
}

// destination reads a link's destination and optional title from just
// after its "(" to its ")": the destination, where it starts, the offset
// after the ")", and whether it is a link at all.
func destination(text []byte, i int) (dest string, start, end int, ok bool) {
	i = skipSpace(text, i)
	start = i
	switch {
	case i < len(text) && text[i] == '<':
		j := bytes.IndexAny(text[i+1:], ">\n")
		if j < 0 || text[i+1+j] != '>' {
			return "", 0, 0, false
		}
		dest, i = string(text[i+1:i+1+j]), i+1+j+1
	default:
		depth, j := 0, i
	loop:
		for ; j < len(text); j++ {
			switch c := text[j]; {
			case c == '\\' && j+1 < len(text) && isASCIIPunct(text[j+1]):
				j++
			case c == '(':
				depth++
			case c == ')':
				if depth == 0 {
					break loop
				}
				depth--
			case c <= ' ':
				break loop
			}
		}
		if depth != 0 {
			return "", 0, 0, false
		}
		dest, i = string(text[i:j]), j
	}
	if j := skipSpace(text, i); j > i && j < len(text) && (text[j] == '"' || text[j] == '\'' || text[j] == '(') {
		closer := text[j]
		if closer == '(' {
			closer = ')'
		}
		k := j + 1
		for ; k < len(text) && text[k] != closer; k++ {
			if text[k] == '\\' {
				k++
			}
		}
		if k >= len(text) {
			return "", 0, 0, false
		}
		i = k + 1
	}
	i = skipSpace(text, i)
	if i >= len(text) || text[i] != ')' {
		return "", 0, 0, false
	}
	return unescape(dest), start, i + 1, true
}

// skipSpace skips spaces and tabs, and at most one newline among them.
func skipSpace(text []byte, i int) int {
	newline := false
	for i < len(text) {
		switch text[i] {
		case ' ', '\t':
		case '\n':
			if newline {
				return i
			}
			newline = true
		default:
			return i
		}
		i++
	}
	return i
}

func isASCIIPunct(c byte) bool {
	return c < utf8.RuneSelf && (unicode.IsPunct(rune(c)) || unicode.IsSymbol(rune(c)))
}

// unescape removes the backslash of every backslash escape: \( is (.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var (
	atxRE     = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRE  = regexp.MustCompile(`^ {0,3}(?:=+|-+)[ \t]*$`)
	notParaRE = regexp.MustCompile(`^(?: {4}|\t| {0,3}(?:[>|<#]|[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)))`)
	htmlIDRE  = regexp.MustCompile(`<[A-Za-z][^<>]*?\s(?:id|name)\s*=\s*["']([^"']+)["']`)
)

// findHeadings collects the headings of d.text: ATX (## Title) and setext
// (a paragraph underlined with === or ---).
func (d *doc) findHeadings() {
	lines := strings.Split(string(d.text), "\n")
	para := []string{} // the lines of the paragraph being read
	for _, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if m := atxRE.FindStringSubmatch(line); m != nil {
			d.headings = append(d.headings, m[1])
			para = para[:0]
			continue
		}
		if setextRE.MatchString(line) && len(para) > 0 {
			d.headings = append(d.headings, strings.Join(para, "\n"))
			para = para[:0]
			continue
		}
		if strings.TrimSpace(line) == "" || notParaRE.MatchString(line) {
			para = para[:0]
			continue
		}
		para = append(para, strings.TrimSpace(line))
	}
}

// Anchors lists the anchors of a markdown file, in order: each heading's,
// a duplicate's with -1, -2... appended as GitHub does, then those of HTML
// elements' id and name attributes.
func Anchors(src []byte) []string {
	d := parse(src)
	var anchors []string
	seen := map[string]int{} // an anchor's base, and how many times it was suffixed
	for _, h := range d.headings {
		base := Anchor(h)
		if base == "" {
			continue
		}
		a := base
		for {
			if _, taken := seen[a]; !taken {
				break
			}
			seen[base]++
			a = fmt.Sprintf("%s-%d", base, seen[base])
		}
		seen[a] = 0
		anchors = append(anchors, a)
	}
	text := bytes.Clone(d.text)
	blankCodeSpans(text)
	blankComments(text)
	for _, m := range htmlIDRE.FindAllSubmatch(text, -1) {
		anchors = append(anchors, string(m[1]))
	}
	return anchors
}

// Anchor is the anchor GitHub gives a heading, markdown as written after
// the #s, before a duplicate's suffix: the heading's text as shown
// (emphasis markers, backticks, link targets and tags gone), lowercased,
// with every character but letters, marks, digits, _ , - and spaces
// dropped and each space made a hyphen.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(headingText(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.Is(unicode.M, r) || unicode.IsDigit(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// codeMark is the first of the private-use runes that stand for a heading's
// code spans while the rest is rendered.
const codeMark = '\uE000'

var tagRE = regexp.MustCompile(`</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>`)

// headingText is a heading's text as GitHub shows it. A code span's text
// is kept as written; outside code, links give their text, images and HTML
// tags nothing, _emphasis_ loses its underscores, escapes and entities are
// resolved.
func headingText(heading string) string {
	heading = strings.TrimSpace(heading)
	var codes []string
	var b strings.Builder
	for i := 0; i < len(heading); {
		switch heading[i] {
		case '\\':
			if i+1 < len(heading) && heading[i+1] == '`' {
				b.WriteString("\\`")
				i += 2
				continue
			}
		case '`':
			n := backtickRun([]byte(heading), i)
			if end := closingRun([]byte(heading), i+n, n); end >= 0 {
				code := strings.ReplaceAll(heading[i+n:end], "\n", " ")
				if len(code) > 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
					code = code[1 : len(code)-1]
				}
				b.WriteRune(codeMark + rune(len(codes)))
				codes = append(codes, code)
				i = end + n
			} else {
				b.WriteString(heading[i : i+n])
				i += n
			}
			continue
		}
		b.WriteByte(heading[i])
		i++
	}
	s := linkTexts(b.String())
	s = tagRE.ReplaceAllString(s, "")
	s = dropUnderscoreEmphasis(s)
	s = html.UnescapeString(unescape(s))
	return restoreCodes(s, codes)
}

// restoreCodes puts each code span's text back in place of its mark.
func restoreCodes(s string, codes []string) string {
	var b strings.Builder
	for _, r := range s {
		if i := int(r - codeMark); i >= 0 && i < len(codes) {
			b.WriteString(codes[i])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// linkTexts replaces each link of s by its text and each image by nothing.
func linkTexts(s string) string {
	var b strings.Builder
	last := 0
	for _, sp := range inlineLinks([]byte(s)) {
		if sp.start < last {
			continue // inside a link already replaced
		}
		b.WriteString(s[last:sp.start])
		if !sp.image {
			b.WriteString(linkTexts(s[sp.textStart:sp.textEnd]))
		}
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// dropUnderscoreEmphasis removes the underscores that open and close
// emphasis (_a_, __a__), keeping those inside words (read_committed) and
// those left unmatched. Asterisks need no such care: the anchor drops them
// as punctuation.
func dropUnderscoreEmphasis(s string) string {
	r := []rune(s)
	drop := make([]bool, len(r))
	type run struct{ at, n int }
	var openers []run
	for i := 0; i < len(r); {
		if r[i] == '\\' {
			i += 2
			continue
		}
		if r[i] != '_' {
			i++
			continue
		}
		j := i
		for j < len(r) && r[j] == '_' {
			j++
		}
		before, after := ' ', ' ' // the line's ends count as space
		if i > 0 {
			before = r[i-1]
		}
		if j < len(r) {
			after = r[j]
		}
		left := !unicode.IsSpace(after) && (!isPunct(after) || unicode.IsSpace(before) || isPunct(before))
		right := !unicode.IsSpace(before) && (!isPunct(before) || unicode.IsSpace(after) || isPunct(after))
		canOpen := left && (!right || isPunct(before))
		canClose := right && (!left || isPunct(after))
		switch {
		case canClose && len(openers) > 0:
			o := openers[len(openers)-1]
			openers = openers[:len(openers)-1]
			n := min(o.n, j-i)
			for k := range n {
				drop[o.at+o.n-1-k] = true
				drop[i+k] = true
			}
		case canOpen:
			openers = append(openers, run{i, j - i})
		}
		i = j
	}
	var b strings.Builder
	for i, c := range r {
		if !drop[i] {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// isPunct is CommonMark's punctuation, a code span's mark included (it
// stands for backticks).
func isPunct(r rune) bool {
	return unicode.IsPunct(r) || unicode.IsSymbol(r) || r >= codeMark && r < codeMark+0x1000
}
