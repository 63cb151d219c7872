package bolt

import (
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
)

// TestContract runs the kv contract suite on bbolt, with and without group
// commit.
func TestContract(t *testing.T) {
	for _, group := range []bool{false, true} {
		name := "Plain"
		if group {
			name = "GroupCommit"
		}
		t.Run(name, func(t *testing.T) {
			kvtest.Run(t, func(t *testing.T) kv.Store {
				db, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{GroupCommit: group})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := db.Check(); err != nil {
						t.Errorf("consistency check: %v", err)
					}
					db.Close()
				})
				return db
			})
		})
	}
}
