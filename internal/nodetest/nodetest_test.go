package nodetest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPeersResolve runs a script from testdata/node that imports the
// official MCP SDK, the way the suite's JavaScript peers do: it fails if
// the packages are installed but do not resolve from there.
func TestPeersResolve(t *testing.T) {
	dir := Dir(t, "@modelcontextprotocol/sdk")
	script := filepath.Join(dir, "resolve_probe.mjs")
	out, err := Cmd(t, dir, script).CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "function" {
		t.Fatalf("typeof Client = %q, want \"function\"", got)
	}
}
