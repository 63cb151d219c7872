package approvals

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckAnchorFile: no file yet is no anchor; a chain that reaches the
// anchored head passes and returns it; a chain anchored further than it
// reaches (rolled back) is an *AnchorDisagreement, for both readers.
func TestCheckAnchorFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openStore(t)
	key := testKey(1)
	path := filepath.Join(t.TempDir(), "anchors.jsonl")
	for name, check := range map[string]func() (Anchor, error){
		"CheckAnchorFile": func() (Anchor, error) { return CheckAnchorFile(ctx, db, path) },
		"CheckLastAnchor": func() (Anchor, error) { return CheckLastAnchor(ctx, db, path) },
	} {
		if an, err := check(); err != nil || an.Seq != 0 {
			t.Fatalf("%s without a file: %+v %v, want no anchor and no error", name, an, err)
		}
	}
	appendN(t, db, key, 3)
	an, wrote, err := NewAnchorer(db, key, path, nil, Anchor{}).Anchor(ctx)
	if err != nil || !wrote || an.Seq != 3 {
		t.Fatalf("anchoring: %+v wrote=%v err=%v, want one written at seq 3, no error", an, wrote, err)
	}
	for name, check := range map[string]func() (Anchor, error){
		"CheckAnchorFile": func() (Anchor, error) { return CheckAnchorFile(ctx, db, path) },
		"CheckLastAnchor": func() (Anchor, error) { return CheckLastAnchor(ctx, db, path) },
	} {
		if got, err := check(); err != nil || got.Seq != 3 || got.Hash != an.Hash {
			t.Errorf("%s: %+v %v, want the anchor at seq 3", name, got, err)
		}
	}
	if err := AppendAnchor(path, SignAnchor(key, 9, strings.Repeat("a", 64), time.Now())); err != nil {
		t.Fatal(err)
	}
	_, err = CheckAnchorFile(ctx, db, path)
	var dis *AnchorDisagreement
	if !errors.As(err, &dis) || dis.Path != path {
		t.Errorf("CheckAnchorFile of a chain behind its anchor: %v, want an *AnchorDisagreement for %s", err, path)
	}
	if _, err := CheckLastAnchor(ctx, db, path); err == nil {
		t.Error("CheckLastAnchor of a chain behind its last anchor: no error")
	}
}

func TestParsePublicKeys(t *testing.T) {
	t.Parallel()
	a := hex.EncodeToString(testKey(1).Public().(ed25519.PublicKey))
	keys, err := ParsePublicKeys(a + ", " + hex.EncodeToString(testKey(2).Public().(ed25519.PublicKey)))
	if err != nil || len(keys) != 2 || hex.EncodeToString(keys[0]) != a {
		t.Fatalf("two keys: %d %v, want 2 with the first %s", len(keys), err, a)
	}
	for _, bad := range []string{"", "abc", a + ",", strings.Repeat("zz", 32)} {
		if _, err := ParsePublicKeys(bad); err == nil {
			t.Errorf("ParsePublicKeys(%q) = nil error, want a refusal", bad)
		}
	}
}

func TestReadSegmentFilesNamesTheFile(t *testing.T) {
	t.Parallel()
	if _, err := ReadSegmentFiles([]string{filepath.Join(t.TempDir(), "absent.jsonl")}); err == nil || !strings.Contains(err.Error(), "absent.jsonl") {
		t.Errorf("a missing segment: %v, want an error naming the file", err)
	}
}
