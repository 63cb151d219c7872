package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/countersign/countersign/config"
)

// docBlocks extracts every ```sh block of a docs page, in order, the way
// walkthroughBlocks reads the README's: a comment line is promised output
// ("…" stands for any text). A block may be indented under a list item.
func docBlocks(t *testing.T, page string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	var cur *readmeBlock
	indent := ""
	sc := bufio.NewScanner(strings.NewReader(page))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && trimmed == "```sh":
			cur, indent = &readmeBlock{line: n}, line[:len(line)-len(trimmed)]
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			line = strings.TrimPrefix(line, indent)
			if line == "#" || strings.HasPrefix(line, "# ") {
				cur.want = append(cur.want, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
			} else {
				cur.script += line + "\n"
			}
		}
	}
	return blocks
}

// TestDocsPaste is issue 20 item 5: docs/actions.md,
// docs/integrations.md and docs/policy.md run clean when pasted block by block, each on a
// fresh store in an empty directory, as TestReadmeWalkthrough runs the
// README: every ```sh block prints what its comments promise, and nothing
// goes to stderr.
func TestDocsPaste(t *testing.T) {
	t.Parallel()
	for _, page := range []string{"actions.md", "integrations.md", "web.md", "policy.md"} {
		t.Run(page, func(t *testing.T) {
			b, err := os.ReadFile("../../docs/" + page)
			if err != nil {
				t.Fatal(err)
			}
			blocks := docBlocks(t, string(b))
			if len(blocks) < 5 {
				t.Fatalf("docs/%s has %d shell blocks, want at least 5; the page changed shape", page, len(blocks))
			}
			pasteBlocks(t, "docs/"+page, blocks)
		})
	}
}

// TestDocsYAMLBlocksLoad: each ```yaml example of docs/policy.md,
// docs/web.md and docs/operations.md is a config that loads as it is
// (strict decoding and validation), so a reader who pastes one into a file
// and runs `serve --config` gets no error. (The shell blocks of the first
// two run in TestDocsPaste.)
func TestDocsYAMLBlocksLoad(t *testing.T) {
	t.Parallel()
	for _, page := range []string{"policy.md", "web.md", "operations.md"} {
		b, err := os.ReadFile("../../docs/" + page)
		if err != nil {
			t.Fatal(err)
		}
		blocks := yamlBlock.FindAllStringSubmatch(string(b), -1)
		if len(blocks) == 0 {
			t.Errorf("docs/%s has no YAML example; the page changed shape", page)
		}
		for i, m := range blocks {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(m[1]), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := config.Load(path); err != nil {
				t.Errorf("docs/%s, YAML block %d does not load: %v\n%s", page, i+1, err, strings.TrimSpace(m[1]))
			}
		}
	}
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
	mdInline  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors lists the anchors GitHub gives a page's headings: the
// text lower-cased, links reduced to their text, punctuation dropped,
// spaces made hyphens, a repeat suffixed -1, -2.
func headingAnchors(page string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := mdHeading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		text := strings.ToLower(mdInline.ReplaceAllString(strings.TrimSpace(m[1]), "$1"))
		var b strings.Builder
		for _, r := range text {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n := 1; out[a]; n++ {
			a = fmt.Sprintf("%s-%d", b.String(), n)
		}
		out[a] = true
	}
	return out
}

// TestDocsLinksResolve: every relative link of README.md, SECURITY.md,
// ARCHITECTURE.md and docs/*.md names a file that exists and, with a
// #fragment into a Markdown page, a heading that page has, so a reader
// following one never lands on nothing.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md", "../../SECURITY.md", "../../ARCHITECTURE.md")
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			links++
			file, frag, _ := strings.Cut(link, "#")
			target := page
			if file != "" {
				target = filepath.Join(filepath.Dir(page), file)
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				if _, statErr := os.Stat(target); statErr != nil {
					t.Errorf("%s links to %s, which does not exist", strings.TrimPrefix(page, "../../"), link)
				}
				continue // a directory
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !headingAnchors(string(tb))[frag] {
				t.Errorf("%s links to %s: %s has no heading with the anchor #%s", strings.TrimPrefix(page, "../../"), link, strings.TrimPrefix(target, "../../"), frag)
			}
		}
	}
	if links < 50 {
		t.Fatalf("found only %d relative links, want at least 50: the pages changed shape", links)
	}
}
