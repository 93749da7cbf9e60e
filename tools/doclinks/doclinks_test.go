package doclinks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the folder above this package that holds go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the package: run the test inside the workbook")
		}
		dir = parent
	}
}

func TestEveryRelativeLinkResolves(t *testing.T) {
	res, err := Check(repoRoot(t))
	require.NoError(t, err)
	// A check that read nothing would pass: make sure it read the book.
	require.Contains(t, res.Files, "README.md")
	require.Contains(t, res.Files, "docs/01-log.md")
	require.Greater(t, res.Links, 100, "links found in %d files", len(res.Files))
	if len(res.Problems) > 0 {
		var b strings.Builder
		for _, p := range res.Problems {
			b.WriteString("\n\t" + p.String())
		}
		t.Errorf("%d of %d links in %d markdown files do not resolve:%s",
			len(res.Problems), res.Links, len(res.Files), b.String())
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	cases := []struct{ heading, want string }{
		// from the book
		{"10. Your turn", "10-your-turn"},
		{"§2.1.6 Compression (压缩传输)", "216-compression-压缩传输"},
		{"§3.1 The network threads (超高并发的网络架构设计)", "31-the-network-threads-超高并发的网络架构设计"},
		{"4. Walkthrough: one `acks=all` produce on three replicas", "4-walkthrough-one-acksall-produce-on-three-replicas"},
		{"`__consumer_offsets`: groups and offsets as records", "__consumer_offsets-groups-and-offsets-as-records"},
		{"`kill -9` of a group's leader", "kill--9-of-a-groups-leader"},
		{"acks, against seed §1.4", "acks-against-seed-14"},
		{"§3.1's three layers, as types", "31s-three-layers-as-types"},
		{"Idempotence (part 2): a retry that cannot duplicate", "idempotence-part-2-a-retry-that-cannot-duplicate"},
		{"04.7 The last stable offset: where read_committed consumers stop", "047-the-last-stable-offset-where-read_committed-consumers-stop"},
		{"Scala 2.12 build (`kafka_2.12-2.8.x`): same keys, other order", "scala-212-build-kafka_212-28x-same-keys-other-order"},
		// what GitHub renders away
		{"*Longest wait* and **more**, _em_ and __strong__", "longest-wait-and-more-em-and-strong"},
		{"__init__ and snake_case_name", "init-and-snake_case_name"},
		{`\_escaped\_ underscores`, "_escaped_-underscores"},
		{"See [the log](01-log.md#a) ![a logo](img/logo.png)here", "see-the-log-here"},
		{"A <kbd>Ctrl</kbd> key, Q&amp;A", "a-ctrl-key-qa"},
		{"`` a`b ``", "ab"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, Anchor(c.heading), "heading %q", c.heading)
	}
}

func TestDuplicateHeadingsAreNumbered(t *testing.T) {
	src := "# Chapter\n\n## Run it\n\ntext\n\n## Run it\n\n### Run it ##\n\n```md\n## Run it\n```\n\n" +
		"Setext heading\n--------------\n\nA <a id=\"kept-by-hand\"></a> anchor.\n"
	require.Equal(t, []string{"chapter", "run-it", "run-it-1", "run-it-2", "setext-heading", "kept-by-hand"},
		Anchors([]byte(src)))
}

func TestParseLinksSkipsCode(t *testing.T) {
	src := strings.Join([]string{
		"# Title",                            // 1
		"",                                   // 2
		"A [link](a.md) and `[code](b.md)`.", // 3
		"```go",                              // 4
		"x := m[k](c.md) // [fenced](d.md)",  // 5
		"```",                                // 6
		"~~~",                                // 7
		"[tilde](e.md)",                      // 8
		"~~~",                                // 9
		"``[x](f.md) ` still code`` ![img](g.png \"title\")", // 10
		"- a list item",            // 11
		"  ```sh",                  // 12
		"  [indented fence](h.md)", // 13
		"  ```",                    // 14
		`\[not a link](i.md) [a [nested] text](<j k.md>) [parens](l(1).md)`, // 15
		"[text over",                        // 16
		"two lines](m.md#frag)",             // 17
		"<!-- [commented](n.md) -->",        // 18
		"[label]: o.md",                     // 19
		"[^note]: a footnote, not a link",   // 20
		"[![badge](p.png)](q.md) [empty]()", // 21
	}, "\n")
	require.Equal(t, []Link{
		{3, "a.md"},
		{10, "g.png"},
		{15, "j k.md"},
		{15, "l(1).md"},
		{17, "m.md#frag"},
		{19, "o.md"},
		{21, "p.png"},
		{21, "q.md"},
		{21, ""},
	}, ParseLinks([]byte(src)))
}

func TestAnUnclosedFenceIsAProblem(t *testing.T) {
	root := t.TempDir()
	write(t, root, "README.md", "# Top\n\n```go\ncode\n\n[hidden](missing.md)\n")
	res, err := Check(root)
	require.NoError(t, err)
	require.Len(t, res.Problems, 1)
	require.Equal(t, 3, res.Problems[0].Line)
	require.Contains(t, res.Problems[0].Reason, "never closed")
}

// tree is a small repository whose links say what they test.
var tree = map[string]string{
	"README.md": `# Top heading

[file](docs/a.md) [folder](docs/) [anchor](docs/a.md#second-heading) [here](#top-heading)
[root](/docs/a.md) [up and back](docs/../README.md) [escaped](docs/a%2Emd) [go line](src/x.go#L12)
[external](https://example.com/nowhere.md) [mail](mailto:a@example.com) [query](docs/a.md?plain=1)
[folder's readme](docs/#a-heading)

[missing](docs/nope.md)
[bad anchor](docs/a.md#third-heading)
[bad here](#top)
![missing image](img/x.png)
[outside](../elsewhere.md)
[readme-less folder](src/#anything)
`,
	"docs/a.md":         "# A heading\n\n## Second heading\n\n## Third\n",
	"docs/README.md":    "# A heading\n",
	"docs/reports/r.md": "[written by a program](nowhere.md)\n",
	"src/x.go":          "package x\n",
}

func write(t *testing.T, root, name, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(name))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func TestCheckReportsEachBrokenLink(t *testing.T) {
	root := t.TempDir() // not a git repository: every .md file is read
	for name, content := range tree {
		write(t, root, name, content)
	}
	res, err := Check(root)
	require.NoError(t, err)
	require.Equal(t, []string{"README.md", "docs/README.md", "docs/a.md"}, res.Files, "generated reports are not read")
	require.Equal(t, 18, res.Links)
	var got []string
	for _, p := range res.Problems {
		got = append(got, p.String())
	}
	require.Equal(t, []string{
		"README.md:8: docs/nope.md (no such file or folder)",
		"README.md:9: docs/a.md#third-heading (no heading in docs/a.md has the anchor #third-heading; nearest: #third)",
		"README.md:10: #top (no heading in this file has the anchor #top; nearest: #top-heading)",
		"README.md:11: img/x.png (no such file or folder)",
		"README.md:12: ../elsewhere.md (outside the repository)",
		"README.md:13: src/#anything (a #fragment into a folder without a README.md)",
	}, got)
}

func TestGitSaysWhichFilesAreRead(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	write(t, root, "README.md", "[a](a.md)\n")
	write(t, root, "a.md", "# A\n")
	out, err := exec.Command("git", "-C", root, "init", "-q").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("git", "-C", root, "add", "README.md").CombinedOutput()
	require.NoError(t, err, "%s", out)

	files, err := MarkdownFiles(root)
	require.NoError(t, err)
	require.Equal(t, []string{"README.md"}, files, "a.md is not tracked")

	res, err := Check(root)
	require.NoError(t, err)
	require.Empty(t, res.Problems, "an untracked file is still a target")
}
