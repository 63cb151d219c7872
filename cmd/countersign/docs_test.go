package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
				t.Fatalf("docs/%s has %d shell blocks; the page changed shape", page, len(blocks))
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
