package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/config"
)

// TestMain lets the test binary stand in for the countersign binary: the
// README test runs its shell blocks against ./countersign, a link to this
// binary, with COUNTERSIGN_TEST_AS_MAIN set. No go build, no network.
// pgtest.Main stops the PostgreSQL cluster the tests may have started.
func TestMain(m *testing.M) {
	if os.Getenv("COUNTERSIGN_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	code := pgtest.Main(m)
	stopBrowser() // web_browser_test.go: the one Chromium of this test binary
	os.Exit(code)
}

// readmeBlock is one ```sh block of the README's walk-through: the script
// and the output its comment lines promise.
type readmeBlock struct {
	line   int // where it starts in README.md
	script string
	want   []string
}

// walkthroughBlocks extracts the ```sh blocks under the README's
// "## Walk-through" heading. In those blocks every comment line is output:
// "# text" promises the line "text" on stdout, in order; "…" in a promised
// line stands for any text (a hash, a time).
func walkthroughBlocks(t *testing.T, readme string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	var cur *readmeBlock
	in := false
	sc := bufio.NewScanner(strings.NewReader(readme))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.HasPrefix(line, "## Walk-through")
		case !in:
		case cur == nil && line == "```sh":
			cur = &readmeBlock{line: n}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil && (line == "#" || strings.HasPrefix(line, "# ")):
			cur.want = append(cur.want, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
		case cur != nil:
			cur.script += line + "\n"
		}
	}
	if len(blocks) < 4 {
		t.Fatalf("found %d shell blocks under ## Walk-through, want at least 4; the README changed shape", len(blocks))
	}
	return blocks
}

// TestReadmeWalkthrough pastes the README's walk-through, block by block,
// into one bash in an empty directory, as a newcomer would on a fresh
// clone, and compares each block's output with its comments.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	pasteBlocks(t, "README.md", walkthroughBlocks(t, string(readme)))
}

// pasteBlocks pastes blocks of the page named, in order, into one bash in
// an empty directory (./countersign is this test binary; the server gets a
// free port instead of 8080, in the scripts and the promised output
// alike), and compares each block's output with what its comments
// promise. Nothing may go to stderr.
func pasteBlocks(t *testing.T, page string, blocks []readmeBlock) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to run %s: %v", page, err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "countersign")); err != nil {
		t.Fatal(err)
	}
	// A free port instead of 8080, which a developer's own server may hold.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	const marker = "@@readme-block-end@@"
	var script strings.Builder
	for _, b := range blocks {
		script.WriteString(strings.ReplaceAll(b.script, "127.0.0.1:8080", addr))
		fmt.Fprintf(&script, "echo %s\n", marker)
	}
	cmd := exec.Command(bash, "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(script.String())
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8",
		"COUNTERSIGN_TEST_AS_MAIN=1", config.ListenEnv + "=" + addr,
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, nothing the page started outlives the test.
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	runErr := cmd.Wait()
	logs, _ := os.ReadFile(filepath.Join(dir, "countersign.log"))
	if runErr != nil || stderr.Len() > 0 {
		t.Errorf("%s wrote to stderr or failed (%v):\n%s\nserver log:\n%s", page, runErr, stderr.String(), logs)
	}
	outs := strings.Split(stdout.String(), marker+"\n")
	if len(outs) != len(blocks)+1 {
		t.Fatalf("ran %d of %d blocks of %s; stdout:\n%s\nstderr:\n%s", len(outs)-1, len(blocks), page, stdout.String(), stderr.String())
	}
	for i, b := range blocks {
		got := strings.Split(strings.TrimSuffix(outs[i], "\n"), "\n")
		if outs[i] == "" {
			got = nil
		}
		want := make([]string, len(b.want))
		for j, w := range b.want {
			want[j] = strings.ReplaceAll(w, "127.0.0.1:8080", addr)
		}
		if !linesMatch(want, got) {
			t.Errorf("%s:%d: the block printed\n%s\nbut its comments promise\n%s", page, b.line, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if t.Failed() {
		t.Logf("server log:\n%s", logs)
	}
}

// linesMatch compares output lines with promised lines, where "…" in a
// promised line matches any text.
func linesMatch(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		parts := strings.Split(want[i], "…")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		if !regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got[i]) {
			return false
		}
	}
	return true
}
