package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// manifestName is the file in a learner's copy that says what was blanked
// and from which commit.
const manifestName = ".exercises.json"

// manifest is the content of manifestName.
type manifest struct {
	SourceCommit string   `json:"source_commit"`          // the reference's HEAD, "" outside git
	SourceDirty  bool     `json:"source_dirty,omitempty"` // the reference had uncommitted changes to tracked files
	Track        string   `json:"track,omitempty"`        // fill or build ("" in copies older than the build track: fill)
	Stages       []string `json:"stages_blanked"`         // the stages whose exercises were blanked
	Exercises    []string `json:"exercises_blanked"`      // their ids
	Carried      []string `json:"carried,omitempty"`      // the ids whose code came from an earlier copy (-from)
	From         string   `json:"from,omitempty"`         // that copy
}

// solutionsDir holds, in a learner's copy, the reference's code of each
// blanked task, one file per id, for "exercises solution".
const solutionsDir = ".exercises/solutions"

// writeOptions are write's choices beside the folder and the stages.
type writeOptions struct {
	Track string // TrackFill or TrackBuild
	From  string // an earlier learner's copy whose written tasks to bring along, or ""
	NoGit bool   // do not make the copy a git repository
}

// write copies the workbook at root into dir with the exercises of stages
// (every stage when empty) blanked. The copy holds the files git tracks
// (the whole tree but .git outside git), as they are in the working tree.
func write(w io.Writer, root, dir string, stages []string, opts writeOptions) error {
	track, err := parseTrack(opts.Track)
	if err != nil {
		return err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(root, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("-dir %s is inside the workbook %s: write the learner's copy beside it, e.g. ../my-workbook", dir, root)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("-dir %s is not empty: give a new folder", dir)
	} else if err != nil && !os.IsNotExist(err) {
		return err
	}
	if opts.From != "" {
		// Refuse a bad -from before anything is written.
		old := readManifest(opts.From)
		if old == nil {
			return fmt.Errorf("-from %s: not a learner's copy (no readable %s)", opts.From, manifestName)
		}
		if _, err := findExercises(opts.From, old.Stages); err != nil {
			return fmt.Errorf("-from %s: %w", opts.From, err)
		}
	}
	all, err := findExercises(root, stages)
	if err != nil {
		return err
	}
	exs := forTrack(all, track)
	blanked := map[string][]byte{} // slash path from root -> the file's blanked content
	for file, fileExs := range byFile(exs) {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return err
		}
		if blanked[file], err = blankFile(file, src, fileExs); err != nil {
			return err
		}
	}
	files, fromGit, err := workbookFiles(root)
	if err != nil {
		return err
	}
	for file := range blanked {
		if !slices.Contains(files, file) {
			files = append(files, file) // an exercise in a file git does not track yet
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	copied := 0
	for _, file := range files {
		ok, err := copyFile(root, dir, file, blanked[file])
		if err != nil {
			return err
		}
		if ok {
			copied++
		}
	}
	if err := writeSolutions(root, dir, exs, blanked); err != nil {
		return err
	}
	m := manifest{Track: track, Stages: stages, Exercises: []string{}}
	if len(stages) == 0 {
		m.Stages = []string{}
		for _, e := range exs {
			if !slices.Contains(m.Stages, e.Stage) {
				m.Stages = append(m.Stages, e.Stage)
			}
		}
	}
	for _, e := range exs {
		m.Exercises = append(m.Exercises, e.ID)
	}
	m.SourceCommit, m.SourceDirty = gitCommit(root)
	if err := writeManifest(dir, m); err != nil {
		return err
	}

	source := "every file git tracks"
	if !fromGit {
		source = "every file (no git here)"
	}
	fmt.Fprintf(w, "wrote a learner's copy of %s to %s: %d files, %s, the %s track\n", root, dir, copied, source, track)
	if len(exs) == 0 {
		fmt.Fprintf(w, "no tasks are marked%s for the %s track: nothing was blanked\n", stagesPhrase(stages), track)
	} else {
		fmt.Fprintf(w, "blanked %d tasks%s:\n", len(exs), stagesPhrase(m.Stages))
		where := map[string]string{} // the copy's own places: blanking moves lines
		if inCopy, err := findExercises(dir, m.Stages); err == nil {
			for _, e := range inCopy {
				where[e.ID] = e.Where()
			}
		}
		for _, e := range exs {
			at := where[e.ID]
			if at == "" {
				at = e.Where()
			}
			fmt.Fprintf(w, "  %s  %s  (%s)\n", e.ID, e.Title, at)
		}
	}
	git := !opts.NoGit && commitAll(dir, "baseline: the workbook with "+plural(len(exs), "task")+" blanked ("+track+" track)") == nil
	if opts.From != "" {
		carried, err := carryForward(w, dir, opts.From)
		if err != nil {
			return err
		}
		m.Carried, m.From = carried, opts.From
		if err := writeManifest(dir, m); err != nil {
			return err
		}
		if git && len(carried) > 0 {
			_ = commitAll(dir, "carried forward from "+opts.From+": "+strings.Join(carried, ", "))
		}
	}
	if git {
		fmt.Fprintf(w, "the copy is a git repository: its first commit is the baseline (git diff shows what you wrote)\n")
	}
	if len(exs) > 0 {
		first := m.Stages[0]
		fmt.Fprintf(w, "next: cd %s && make check STAGE=%s   (or: go run ./tools/exercises check -stage %s)\n", dir, first, first)
	}
	return nil
}

// writeManifest writes m to dir's manifest file.
func writeManifest(dir string, m manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, manifestName), append(data, '\n'), 0o644)
}

// writeSolutions keeps, in the copy, the reference's code of each task it
// blanks, with the imports its file lost when it was blanked.
func writeSolutions(root, dir string, exs []*Exercise, blanked map[string][]byte) error {
	if len(exs) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(dir, solutionsDir), 0o755); err != nil {
		return err
	}
	for _, e := range exs {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(e.File)))
		if err != nil {
			return err
		}
		text := solutionText(e, src)
		if lost := lostImports(e.File, src, blanked[e.File]); len(lost) > 0 {
			text = strings.Replace(text, "\n\n", "\n// imports the file lost when it was blanked, to add back as the code needs them: "+strings.Join(lost, ", ")+"\n\n", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, solutionsDir, e.ID+".txt"), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// lostImports lists the imports of orig that blanked no longer has.
func lostImports(file string, orig, blanked []byte) []string {
	specs := func(src []byte) []string {
		f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.ImportsOnly)
		if err != nil {
			return nil
		}
		var out []string
		for _, is := range f.Imports {
			spec := is.Path.Value
			if is.Name != nil {
				spec = is.Name.Name + " " + spec
			}
			out = append(out, spec)
		}
		return out
	}
	after := specs(blanked)
	var lost []string
	for _, s := range specs(orig) {
		if !slices.Contains(after, s) {
			lost = append(lost, s)
		}
	}
	return lost
}

// solutionText is a task's reference code as a learner should read it:
// the file and lines it goes to, then the region.
func solutionText(e *Exercise, src []byte) string {
	lines := strings.Split(string(src), "\n")
	region := strings.Join(lines[e.codeFrom-1:e.End-1], "\n")
	return fmt.Sprintf("// %s %s: %s\n// the reference's code, %s, lines %d-%d\n\n%s\n", e.Kind, e.ID, e.Title, e.File, e.codeFrom, e.End-1, region)
}

// commitAll makes dir a git repository if it is not one and commits
// everything in it. Git missing is not an error of the copy: it is said
// by the caller's silence about git.
func commitAll(dir, message string) error {
	gitIn := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=workbook", "-c", "user.email=workbook@localhost", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		if err := gitIn("init", "-q"); err != nil {
			return err
		}
	}
	if err := gitIn("add", "-A"); err != nil {
		return err
	}
	return gitIn("commit", "-q", "--allow-empty", "-m", message)
}

// plural is "1 task", "2 tasks".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// byFile groups exercises by their file.
func byFile(exs []*Exercise) map[string][]*Exercise {
	files := map[string][]*Exercise{}
	for _, e := range exs {
		files[e.File] = append(files[e.File], e)
	}
	return files
}

// workbookFiles lists the files to copy, slash paths from root: those git
// tracks, or every file outside .git when git cannot say.
func workbookFiles(root string) (files []string, fromGit bool, err error) {
	out, gitErr := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if gitErr == nil {
		for _, f := range bytes.Split(out, []byte{0}) {
			if len(f) > 0 {
				files = append(files, string(f))
			}
		}
		return files, true, nil
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, false, err
}

// copyFile copies root/file to dir/file with its mode, or writes content
// there instead when it is not nil. A symlink is copied as a symlink. A
// file git tracks but the working tree lacks (deleted, not yet committed)
// is skipped: ok is false.
func copyFile(root, dir, file string, content []byte) (ok bool, err error) {
	src := filepath.Join(root, filepath.FromSlash(file))
	dst := filepath.Join(dir, filepath.FromSlash(file))
	fi, err := os.Lstat(src)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if fi.IsDir() {
		return false, nil // a submodule: git lists its folder
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return false, err
		}
		return true, os.Symlink(target, dst)
	}
	if content == nil {
		if content, err = os.ReadFile(src); err != nil {
			return false, err
		}
	}
	return true, os.WriteFile(dst, content, fi.Mode().Perm())
}

// gitCommit is root's HEAD, and whether tracked files changed since.
func gitCommit(root string) (commit string, dirty bool) {
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false
	}
	status, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), err == nil && len(bytes.TrimSpace(status)) > 0
}
