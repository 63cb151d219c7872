//go:build linux

package approvals

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockHolderEnv, set, makes TestAnchorLockHolder the other process of
// TestAppendAnchorWaitsForAnotherProcess: it names the anchor file.
const lockHolderEnv = "COUNTERSIGN_TEST_ANCHOR_LOCK_HOLDER"

// TestAnchorLockHolder is not a test on its own: run by
// TestAppendAnchorWaitsForAnotherProcess as a second process, it takes the
// anchor file's lock as AppendAnchor does, writes the first half of the
// line in $COUNTERSIGN_TEST_ANCHOR_LINE, says "locked" on stdout, and
// writes the rest only once another process waits for the lock (as
// /proc/locks shows it) or its stdin closes.
func TestAnchorLockHolder(t *testing.T) {
	path := os.Getenv(lockHolderEnv)
	if path == "" {
		t.Skip("the other process of TestAppendAnchorWaitsForAnotherProcess")
	}
	line := os.Getenv("COUNTERSIGN_TEST_ANCHOR_LINE") + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line[:len(line)/2]); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	stdinClosed := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stdinClosed) }()
	fmt.Println("locked")
	waited := false
	for !waited {
		select {
		case <-stdinClosed:
			fmt.Println("nobody waited")
			waited = true
			continue
		case <-time.After(5 * time.Millisecond):
		}
		waited = lockWaiter(t, st.Ino)
	}
	if _, err := f.WriteString(line[len(line)/2:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unlockFile(f); err != nil {
		t.Fatal(err)
	}
}

// lockWaiter reports whether /proc/locks shows a process blocked on a lock
// of the file with inode ino ("1: -> FLOCK ADVISORY WRITE pid maj:min:ino …").
func lockWaiter(t *testing.T, ino uint64) bool {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 7 || fs[1] != "->" {
			continue
		}
		if parts := strings.Split(fs[6], ":"); len(parts) == 3 && parts[2] == fmt.Sprint(ino) {
			return true
		}
	}
	return false
}

// TestAppendAnchorWaitsForAnotherProcess: two processes append to one
// anchor file (a leader handing over to the next on a shared volume).
// Another process holds the file's lock with half a line written;
// AppendAnchor here must wait for it (the other process sees it blocked
// in /proc/locks and only then finishes its line), so that both lines are
// whole anchors, in order. Without the lock this process's line lands in
// the middle of the other's.
func TestAppendAnchorWaitsForAnotherProcess(t *testing.T) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks to see a waiter in")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	key := testKey(7)
	hash := strings.Repeat("cd", 32)
	path := filepath.Join(t.TempDir(), "shared", "audit.anchors")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	theirs, err := json.Marshal(SignAnchor(key, 5, hash, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestAnchorLockHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+path, "COUNTERSIGN_TEST_ANCHOR_LINE="+string(theirs))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "locked" {
		t.Fatalf("the other process did not take the lock: said %q, want %q\n%s", out.Text(), "locked", stderr.String())
	}

	ours := SignAnchor(key, 6, hash, time.Now())
	appendErr := AppendAnchor(path, ours)
	stdin.Close()
	var said []string
	for out.Scan() {
		said = append(said, out.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the other process: %v\n%s\n%s", err, strings.Join(said, "\n"), stderr.String())
	}
	if appendErr != nil {
		t.Fatalf("AppendAnchor: %v", appendErr)
	}
	if strings.Contains(strings.Join(said, "\n"), "nobody waited") {
		t.Errorf("AppendAnchor did not wait for the other process's lock")
	}
	as, err := ReadAnchors(path)
	if err != nil {
		raw, _ := os.ReadFile(path)
		t.Fatalf("the anchor file after two writers: %v\n%s", err, raw)
	}
	if len(as) != 2 || as[0].Seq != 5 || as[1].Seq != 6 {
		t.Fatalf("anchors %+v, want seq 5 (the other process's) then 6 (ours)", as)
	}
}

// TestAppendAnchorSuperseded: a writer that decided to anchor an older
// head than the file's last (another leader anchored meanwhile) appends
// nothing and says so (ErrAnchorSuperseded); the Anchorer takes that as
// nothing written.
func TestAppendAnchorSuperseded(t *testing.T) {
	key := testKey(8)
	hash := strings.Repeat("ef", 32)
	path := filepath.Join(t.TempDir(), "audit.anchors")
	if err := AppendAnchor(path, SignAnchor(key, 9, hash, time.Now())); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{9, 7} {
		if err := AppendAnchor(path, SignAnchor(key, seq, hash, time.Now())); !errors.Is(err, ErrAnchorSuperseded) {
			t.Errorf("appending seq %d after seq 9: %v, want ErrAnchorSuperseded", seq, err)
		}
	}
	if as, err := ReadAnchors(path); err != nil || len(as) != 1 || as[0].Seq != 9 {
		t.Fatalf("anchors %+v (%v), want only seq 9", as, err)
	}
	if err := AppendAnchor(path, SignAnchor(key, 10, hash, time.Now())); err != nil {
		t.Errorf("appending seq 10 after seq 9: %v", err)
	}
}
