package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scratchModule writes a Go module outside this one, as a user's would be:
// it requires github.com/countersign/countersign (replaced by this clone,
// so that nothing is downloaded) and holds files (name -> content).
func scratchModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files["go.mod"] = "module example.com/agent\n\ngo 1.26\n\nrequire github.com/countersign/countersign v0.0.0\n\nreplace github.com/countersign/countersign => " + root + "\n"
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goIn runs the go command in dir, offline, with env added.
func goIn(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build a scratch module: %v", err)
	}
	cmd := exec.Command(gobin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// TestGoClientFromAScratchModule is issue 20 item 2 as a user meets it: a
// module of its own imports client/ and drives it against the real server,
// through approve, approve with changes, deny, expiry, clarification and
// resume after a timeout, verifying each receipt offline
// (testdata/scratch-client/agent_test.go). The agent's key is scoped, as
// the README's is.
func TestGoClientFromAScratchModule(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `
tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
  - name: flush_cache
    category: mutating
    timeout: 2s
`)
	agent := e.CreateKey("deployer", "agent", "--scopes", "ops")
	alice := e.CreateKey("alice", "member")
	e.Start()
	pub := strings.TrimSpace(e.MustOK(agent, "export_public_key", nil).Data["public_key"].(string))

	src, err := os.ReadFile(filepath.Join("testdata", "scratch-client", "agent_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"agent_test.go": string(src)}
	// The documentation's Go programs, as a reader would paste them.
	doc, err := os.ReadFile("../../docs/integrations.md")
	if err != nil {
		t.Fatal(err)
	}
	progs := goPrograms(string(doc))
	if len(progs) == 0 {
		t.Fatal("docs/integrations.md shows no Go program (a ```go block with package main)")
	}
	for i, p := range progs {
		files[fmt.Sprintf("docs%d/main.go", i+1)] = p
	}
	dir := scratchModule(t, files)
	if out, err := goIn(t, dir, nil, "vet", "./..."); err != nil {
		t.Fatalf("the documentation's Go programs do not build against the client (go vet: %v, want no error):\n%s", err, out)
	}
	out, err := goIn(t, dir, []string{"CS_URL=" + e.URL, "CS_AGENT=" + agent, "CS_ALICE=" + alice, "CS_PUBKEY=" + pub}, "test", "-count=1", "-v", ".")
	if err != nil {
		t.Fatalf("go test in the scratch module: %v\n%s", err, out)
	}
	for _, name := range []string{"TestApproved", "TestApprovedWithChanges", "TestDenied", "TestExpired", "TestNeedsClarification", "TestResumeAfterATimeout", "TestScopesAndBadKeys"} {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("the scratch module's %s did not pass (want %q in the output):\n%s", name, "--- PASS: "+name+" ", out)
		}
	}
}

// goPrograms are the ```go blocks of a page that are whole programs.
func goPrograms(page string) []string {
	var out []string
	for _, block := range strings.Split(page, "```go\n")[1:] {
		code, _, ok := strings.Cut(block, "\n```")
		if ok && strings.Contains(code, "package main\n") {
			out = append(out, code+"\n")
		}
	}
	return out
}
