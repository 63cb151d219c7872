package bolt

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestCopyNewNeverReplaces: the copy arrives whole at a new name, and a
// name that exists is left as it is, with no temporary file behind.
func TestCopyNewNeverReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from, to := filepath.Join(dir, "backup.db"), filepath.Join(dir, "store.db")
	if err := os.WriteFile(from, []byte("the backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CopyNew(from, to); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(to); err != nil || string(b) != "the backup" {
		t.Fatalf("the copy holds %q (%v), want %q", b, err, "the backup")
	}
	if err := os.WriteFile(from, []byte("another"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CopyNew(from, to); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CopyNew onto an existing file: err = %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(to); string(b) != "the backup" {
		t.Errorf("the existing file now holds %q, want it untouched (%q)", b, "the backup")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("the directory holds %d files, want 2 (no temporary file left)", len(ents))
	}
}
