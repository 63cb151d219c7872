// Package nodetest finds the Node.js peers the tests run against: the
// official MCP SDK and MCP servers from npm, the Adaptive Cards parser,
// axe-core and the chat platforms' published type definitions, installed
// from testdata/node/package.json (package-lock.json pins them) by
// `.ci/run` with `npm ci`.
//
// A test that needs one calls Modules or Bin. Where node or the packages
// are missing the test is skipped, except under CI=true, where it fails:
// CI installs them, so a missing peer there is a broken CI, not a reason to
// pass.
package nodetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Install is the command that installs the peers, for messages.
const Install = "npm ci --prefix testdata/node"

// root is testdata/node at the module root, found from this file's place.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "node")
}

// missing skips t, or fails it under CI=true, saying what is missing and
// how to install it.
func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing (CI=true): run %s", what, Install)
	}
	t.Skipf("%s is missing: run %s to run this test", what, Install)
}

// Node returns the path of the node binary, or skips t (fails under CI).
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node")
	}
	return p
}

// Modules returns the absolute path of testdata/node/node_modules with
// pkg installed in it (an npm package name such as
// "@modelcontextprotocol/sdk"), or skips t (fails under CI).
func Modules(t testing.TB, pkg string) string {
	t.Helper()
	Node(t)
	dir, err := filepath.Abs(filepath.Join(root(), "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, pkg, "package.json")); err != nil {
		missing(t, "the npm package "+pkg)
	}
	return dir
}

// Bin returns the absolute path of an installed package's executable in
// node_modules/.bin (such as "mcp-server-filesystem"), after checking that
// pkg is installed, or skips t (fails under CI).
func Bin(t testing.TB, pkg, name string) string {
	t.Helper()
	p := filepath.Join(Modules(t, pkg), ".bin", name)
	if _, err := os.Stat(p); err != nil {
		missing(t, name+" (from "+pkg+")")
	}
	return p
}

// Dir returns the absolute path of testdata/node, where the tests'
// JavaScript peers (committed .mjs scripts, such as an MCP host built on
// the official SDK) live, so that their imports resolve from its
// node_modules; it skips t (fails under CI) when pkg is not installed.
func Dir(t testing.TB, pkg string) string {
	t.Helper()
	return filepath.Dir(Modules(t, pkg))
}

// Cmd returns an exec.Cmd that runs node with args in dir (from Dir), so
// that a script's ESM imports resolve from testdata/node/node_modules.
func Cmd(t testing.TB, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Node(t), args...)
	cmd.Dir = dir
	return cmd
}
