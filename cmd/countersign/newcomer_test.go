package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	countersign "github.com/countersign/countersign"
)

// runWith runs countersign in dir's config with env and returns stdout,
// stderr and the error.
func runWith(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

func TestHelpExitsZeroAndExtraArgumentsAreRefused(t *testing.T) {
	for _, cmd := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"keys", "create", "--help"}, {"call", "--help"}, {"ready", "-h"}, {"init", "--help"}} {
		_, errOut, err := runWith(t, nil, cmd...)
		if err != nil {
			t.Errorf("%v: err = %v, want nil (help is no failure)", cmd, err)
		}
		if !strings.Contains(errOut, "-config") {
			t.Errorf("%v printed no usage: %q", cmd, errOut)
		}
	}
	e := newTestEnv(t, "")
	for _, cmd := range [][]string{
		{"serve", "--config", e.cfg, "extra-arg"},
		{"keys", "create", "--config", e.cfg, "--name", "x", "--role", "agent", "oops"},
		{"audit", "verify", "--config", e.cfg, "now"},
		{"init", "--config", filepath.Join(e.dir, "n.yaml"), "please"},
	} {
		_, _, err := runWith(t, nil, cmd...)
		if err == nil || !strings.Contains(err.Error(), "unexpected argument") {
			t.Errorf("%v: err = %v, want the extra argument refused", cmd, err)
		}
	}
}

func TestListenFlagAndEnvironmentOverrideTheConfig(t *testing.T) {
	e := newTestEnv(t, "")
	// The file says 127.0.0.1:0; the environment and the flag win, in
	// that order, and each is checked under its own name.
	if _, _, err := runWith(t, map[string]string{listenEnv: "nowhere"}, "serve", "--config", e.cfg); err == nil || !strings.Contains(err.Error(), `$COUNTERSIGN_LISTEN: "nowhere" is not host:port`) {
		t.Fatalf("bad env: %v", err)
	}
	if _, _, err := runWith(t, map[string]string{listenEnv: "nowhere"}, "serve", "--config", e.cfg, "--listen", "nope"); err == nil || !strings.Contains(err.Error(), `--listen: "nope" is not host:port`) {
		t.Fatalf("bad flag: %v", err)
	}
	cfg, err := loadConfig(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.overrideListen("", "127.0.0.1:9999"); err != nil || cfg.Listen != "127.0.0.1:9999" {
		t.Fatalf("env override: %v %q", err, cfg.Listen)
	}
	if err := cfg.overrideListen("127.0.0.1:7777", "127.0.0.1:9999"); err != nil || cfg.Listen != "127.0.0.1:7777" {
		t.Fatalf("flag override: %v %q", err, cfg.Listen)
	}
	// The real server listens where the environment says.
	e.env[listenEnv] = "127.0.0.1:0"
	e.Start()
	if !strings.Contains(e.logs.String(), "msg=listening addr=127.0.0.1:") {
		t.Fatalf("logs: %s", e.logs.String())
	}
}

func TestStartupSaysWhatRunsAndWarnsWhenNothingIsGated(t *testing.T) {
	// A file that holds only listen: and store: runs standalone (not
	// layered over the default): no slot is gated, and the log says so
	// loudly, with the file it loaded.
	e := newTestEnv(t, "")
	e.Start()
	logs := e.logs.String()
	for _, want := range []string{"msg=\"config loaded\" file=" + e.cfg, "gated_slots=0", "tools_declared=0", "chat=none", "level=WARN msg=\"NOTHING IS GATED: no memory slot has confirm: true"} {
		if !strings.Contains(logs, want) {
			t.Errorf("missing %q in the start-up log:\n%s", want, logs)
		}
	}
	e.Stop()

	// The default's slots, as `countersign init` writes them: two gated,
	// four tools, and no warning.
	d := newTestEnv(t, defaultWithoutListenAndStore(t))
	d.Start()
	logs = d.logs.String()
	for _, want := range []string{"gated_slots=2", "slots=active_medication,code_status", "tools_declared=4"} {
		if !strings.Contains(logs, want) {
			t.Errorf("missing %q in:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "NOTHING IS GATED") {
		t.Errorf("warned with gated slots:\n%s", logs)
	}
}

// defaultWithoutListenAndStore is the embedded default minus its listen
// and store keys (the test harness sets those).
func defaultWithoutListenAndStore(t *testing.T) string {
	t.Helper()
	var out []string
	skip := false
	for _, line := range strings.Split(string(countersign.DefaultConfig), "\n") {
		switch {
		case strings.HasPrefix(line, "listen:"):
			continue
		case strings.HasPrefix(line, "store:"):
			skip = true
			continue
		case skip && (strings.HasPrefix(line, " ") || line == ""):
			continue
		}
		skip = false
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func TestInitWritesTheDefaultAndNeverOverwrites(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	out, _, err := runWith(t, nil, "init", "--config", p)
	if err != nil || !strings.Contains(out, "wrote "+p) {
		t.Fatalf("init: %v %q", err, out)
	}
	b, _ := os.ReadFile(p)
	if !bytes.Equal(b, countersign.DefaultConfig) {
		t.Fatal("init did not write the embedded default")
	}
	if err := os.WriteFile(p, []byte("listen: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runWith(t, nil, "init", "--config", p); err == nil || !strings.Contains(err.Error(), "already exists and is left as it is") {
		t.Fatalf("second init: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "listen: 127.0.0.1:1\n" {
		t.Fatalf("init overwrote the file: %q", b)
	}
}

func TestMissingStoreDirectoryIsReportedAsSuch(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	missing := filepath.Join(dir, "no", "such")
	if err := os.WriteFile(p, []byte("store:\n  path: "+missing+"/cs.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runWith(t, nil, "keys", "create", "--config", p, "--name", "a", "--role", "admin")
	if err == nil || !strings.Contains(err.Error(), "store.path: the directory "+missing+" does not exist") || strings.Contains(err.Error(), "signing") {
		t.Fatalf("err = %v, want the missing store directory named", err)
	}
}

func TestKeysCreateRefusesEmptyScopesAndAuditsKindAndScopes(t *testing.T) {
	e := newTestEnv(t, "")
	for _, s := range []string{",,", " ", ", ,"} {
		_, _, err := runWith(t, nil, "keys", "create", "--config", e.cfg, "--name", "w", "--role", "agent", "--scopes", s)
		if err == nil || !strings.Contains(err.Error(), "--scopes:") || !strings.Contains(err.Error(), "names no user_id") {
			t.Errorf("--scopes %q: err = %v, want a refusal", s, err)
		}
	}
	admin := e.CreateKey("ops", "admin")
	ward := e.CreateKey("ward_bot", "agent", "--scopes", "patient_42,patient_7")
	e.Start()
	r := e.MustOK(admin, "audit_log", map[string]any{"limit": 10})
	for _, want := range []string{`"ward_bot" role=agent kind=agent scopes=patient_42,patient_7 via cli`, `"ops" role=admin kind=person scopes= via cli`} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("missing %q in the audit log:\n%s", want, r.Text)
		}
	}
	// The scoped key really is scoped: the refusal is the proof the
	// scopes were stored, not only audited.
	if got := e.Call(ward, "list_memories", map[string]any{"user_id": "patient_1"}); got.Status != 403 {
		t.Errorf("a scoped key read another space: %s", got)
	}
	e.MustOK(ward, "list_memories", map[string]any{"user_id": "patient_7"})
}
