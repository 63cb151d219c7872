package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestVersionCommand runs `countersign version` and `version --short`
// through run(), and refuses an argument it does not take.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"version"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("version: %v (%s)", err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "countersign "+version+"\n") || !strings.Contains(out.String(), "  go        "+runtime.Version()) {
		t.Errorf("version printed %q, want countersign %s, then the revision and the Go version", out.String(), version)
	}
	out.Reset()
	if err := run(context.Background(), []string{"version", "--short"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if out.String() != version+"\n" {
		t.Errorf("version --short printed %q, want %q", out.String(), version+"\n")
	}
	err := run(context.Background(), []string{"version", "extra"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Errorf("version extra: got %v, want an error naming the unexpected argument", err)
	}
}
