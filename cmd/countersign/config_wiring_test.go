package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test of the config that needs cmd: serve's refusal (the rest are in
// package config).

func TestServeRefusesBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte("sweep:\n  schedule: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), []string{"serve", "--config", p}, func(string) string { return "" }, nil, os.Stdout, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "sweep.schedule") {
		t.Fatalf("serve with a bad config: err = %v, want an error naming %q", err, "sweep.schedule")
	}
}
