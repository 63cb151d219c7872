package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestTeamsAndEmailDocsConfigsLoad: each YAML example of docs/teams.md
// and docs/email.md is a config that loads as it is (strict decoding and
// validation), so it works when pasted.
func TestTeamsAndEmailDocsConfigsLoad(t *testing.T) {
	t.Parallel()
	for _, page := range []string{"teams.md", "email.md"} {
		b, err := os.ReadFile("../../docs/" + page)
		if err != nil {
			t.Fatal(err)
		}
		blocks := yamlBlock.FindAllStringSubmatch(string(b), -1)
		if len(blocks) == 0 {
			t.Fatalf("docs/%s has no YAML example", page)
		}
		for i, m := range blocks {
			if _, err := config.Parse([]byte(m[1]), t.TempDir()); err != nil {
				t.Errorf("docs/%s, YAML block %d does not load: %v\n%s", page, i+1, err, strings.TrimSpace(m[1]))
			}
		}
	}
}
