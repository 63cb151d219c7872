package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
)

func TestServeRejectsMissingAndUnknownKeys(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	key := e.CreateKey("ops", "admin")
	e.Start()

	if r := e.Call("", "get_memory", `{"memory_id": 1}`); r.Status != http.StatusUnauthorized || !strings.Contains(r.Error, "authentication required") {
		t.Fatalf("no key: %s, want %d with %q", r, http.StatusUnauthorized, "authentication required")
	}
	if r := e.Call("cs_sk_not-a-key", "get_memory", `{"memory_id": 1}`); r.Status != http.StatusUnauthorized {
		t.Fatalf("unknown key: %s, want %d", r, http.StatusUnauthorized)
	}
	if r := e.Call(key, "no_such_tool", `{}`); r.Status != http.StatusNotFound || !strings.Contains(r.Error, "unknown tool 'no_such_tool'") {
		t.Fatalf("unknown tool: %s, want %d with %q", r, http.StatusNotFound, "unknown tool 'no_such_tool'")
	}
}

func TestKeysCreateFailsWhileServerHoldsStore(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "the lock of the bbolt file")
	e := newTestEnv(t, "")
	e.Start()
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"keys", "create", "--config", e.cfg, "--name", "x", "--role", "agent"}, e.getenv, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "locked by another process") || !strings.Contains(err.Error(), "is ./countersign serve running on it? Stop it first") {
		t.Fatalf("keys create while serving: err = %v, want a lock error", err)
	}
	if out.Len() != 0 {
		t.Fatalf("printed %q on failure, want nothing", out.String())
	}
}

func TestKeysCreateValidatesArguments(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"keys", "create", "--config", e.cfg, "--role", "owner"}, e.getenv, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--name: required") || !strings.Contains(err.Error(), "Unknown role 'owner'") {
		t.Fatalf("err = %v, want both problems", err)
	}
}
