package nodetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Typed is one JSON document and the TypeScript type it must satisfy (a
// type exported by a committed module under testdata/node, such as
// check_goldens.ts).
type Typed struct {
	Name string // names the document in failures: the golden file
	Type string // the exported type, such as "SlackGolden"
	JSON []byte
}

// TypeCheck checks that each document satisfies its type with the
// installed typescript's tsc --noEmit (strict): it writes them into one
// module, each as `export const g = <json> satisfies <Type>;`, importing
// the types from module (a file under testdata/node, whose imports resolve
// from its node_modules). A document that does not fit fails t with tsc's
// message. It skips t (fails under CI) when typescript is missing.
func TypeCheck(t testing.TB, module string, docs []Typed) {
	t.Helper()
	tsc := Bin(t, "typescript", "tsc")
	src, err := filepath.Abs(filepath.Join(root(), module))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("the type module %s: %v", module, err)
	}
	types := map[string]bool{}
	var b strings.Builder
	for _, d := range docs {
		types[d.Type] = true
	}
	b.WriteString("import type { ")
	first := true
	for typ := range types {
		if !first {
			b.WriteString(", ")
		}
		b.WriteString(typ)
		first = false
	}
	fmt.Fprintf(&b, " } from %q;\n", src)
	for i, d := range docs {
		if !json.Valid(d.JSON) {
			t.Fatalf("%s is not JSON", d.Name)
		}
		fmt.Fprintf(&b, "\n// %s\nexport const g%d = %s satisfies %s;\n", strings.ReplaceAll(d.Name, "\n", " "), i, strings.TrimSpace(string(d.JSON)), d.Type)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "goldens.ts")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	config := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022", "module": "nodenext",
		"moduleResolution": "nodenext", "allowImportingTsExtensions": true, "skipLibCheck": true, "types": []},
		"files": ["goldens.ts"]}`
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := Cmd(t, dir, tsc, "--project", filepath.Join(dir, "tsconfig.json"), "--pretty", "false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc --noEmit: the documents do not fit the published types (%v):\n%s\n(generated module: %s)", err, annotate(string(out), docs, b.String()), file)
	}
}

// annotate names the document of each error line tsc printed (they cite
// goldens.ts(line,col)).
func annotate(out string, docs []Typed, src string) string {
	lines := strings.Split(src, "\n")
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		b.WriteString(l)
		var n, c int
		if _, err := fmt.Sscanf(l[strings.Index(l, "(")+1:], "%d,%d)", &n, &c); err == nil && strings.HasPrefix(l, "goldens.ts(") {
			for i := n - 1; i >= 0 && i < len(lines); i-- {
				if strings.HasPrefix(lines[i], "// ") {
					b.WriteString("   [in " + strings.TrimPrefix(lines[i], "// ") + "]")
					break
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
