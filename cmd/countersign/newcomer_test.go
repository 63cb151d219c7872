package main

import (
	"bytes"
	"context"
	"errors"
	"github.com/countersign/countersign/bot"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	countersign "github.com/countersign/countersign"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/internal/logtest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
	t.Parallel()
	for _, cmd := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"keys", "create", "--help"}, {"call", "--help"}, {"ready", "-h"}, {"init", "--help"}, {"hook", "claude-code", "--help"}} {
		_, errOut, err := runWith(t, nil, cmd...)
		if err != nil {
			t.Errorf("%v: err = %v, want nil (help is no failure)", cmd, err)
		}
		if !strings.Contains(errOut, "-config") {
			t.Errorf("%v printed no usage: %q, want it to contain %q", cmd, errOut, "-config")
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
	t.Parallel()
	e := newTestEnv(t, "")
	// The file says 127.0.0.1:0; the environment and the flag win, in
	// that order, and each is checked under its own name.
	if _, _, err := runWith(t, map[string]string{config.ListenEnv: "nowhere"}, "serve", "--config", e.cfg); err == nil || !strings.Contains(err.Error(), `$COUNTERSIGN_LISTEN: "nowhere" is not host:port`) {
		t.Fatalf("bad env: err = %v, want an error containing %q", err, `$COUNTERSIGN_LISTEN: "nowhere" is not host:port`)
	}
	if _, _, err := runWith(t, map[string]string{config.ListenEnv: "nowhere"}, "serve", "--config", e.cfg, "--listen", "nope"); err == nil || !strings.Contains(err.Error(), `--listen: "nope" is not host:port`) {
		t.Fatalf("bad flag: err = %v, want an error containing %q", err, `--listen: "nope" is not host:port`)
	}
	// (config.TestOverrideListen: which of them wins.)
	// The real server listens where the environment says.
	e.env[config.ListenEnv] = "127.0.0.1:0"
	e.Start()
	if !strings.Contains(e.logs.String(), "msg=listening addr=127.0.0.1:") {
		t.Fatalf("logs lack %q:\n%s", "msg=listening addr=127.0.0.1:", e.logs.String())
	}
}

func TestStartupSaysWhatRunsAndWarnsWhenNothingIsGated(t *testing.T) {
	t.Parallel()
	// A file that holds only listen: and store: runs standalone (not
	// layered over the default): no slot is gated, and the log says so
	// loudly, with the file it loaded.
	e := newTestEnv(t, "")
	e.Start()
	logs := e.logs.String()
	for _, want := range []string{"msg=\"config loaded\" file=" + e.cfg, "gated_slots=0", "tools_declared=0", "chat=none web_console=true", "level=WARN msg=\"NOTHING IS GATED: no memory slot has confirm: true"} {
		if !strings.Contains(logs, want) {
			t.Errorf("missing %q in the start-up log:\n%s", want, logs)
		}
	}
	e.Stop()

	// The default's slots, as `countersign init` writes them: two gated,
	// seven tools, and no warning.
	d := newTestEnv(t, defaultWithoutListenAndStore(t))
	d.Start()
	logs = d.logs.String()
	for _, want := range []string{"gated_slots=2", "slots=active_medication,code_status", "tools_declared=7"} {
		if !strings.Contains(logs, want) {
			t.Errorf("missing %q in:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "NOTHING IS GATED") {
		t.Errorf("warned with gated slots, want no %q in:\n%s", "NOTHING IS GATED", logs)
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
	t.Parallel()
	p := filepath.Join(t.TempDir(), "config.yaml")
	out, _, err := runWith(t, nil, "init", "--config", p)
	if err != nil || !strings.Contains(out, "wrote "+p) {
		t.Fatalf("init: %v %q, want no error and %q", err, out, "wrote "+p)
	}
	b, _ := os.ReadFile(p)
	if !bytes.Equal(b, countersign.DefaultConfig) {
		t.Fatal("init did not write the embedded default")
	}
	if err := os.WriteFile(p, []byte("listen: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runWith(t, nil, "init", "--config", p); err == nil || !strings.Contains(err.Error(), "already exists and is left as it is") {
		t.Fatalf("second init: err = %v, want an error containing %q", err, "already exists and is left as it is")
	}
	if b, _ := os.ReadFile(p); string(b) != "listen: 127.0.0.1:1\n" {
		t.Fatalf("init overwrote the file: %q, want %q", b, "listen: 127.0.0.1:1\n")
	}
}

func TestMissingStoreDirectoryIsReportedAsSuch(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	e := newTestEnv(t, "")
	for _, s := range []string{",,", " ", ", ,", ""} {
		_, _, err := runWith(t, nil, "keys", "create", "--config", e.cfg, "--name", "w", "--role", "agent", "--scopes", s)
		if err == nil || !strings.Contains(err.Error(), "--scopes:") || !strings.Contains(err.Error(), "names no user_id") {
			t.Errorf("--scopes %q: err = %v, want a refusal", s, err)
		}
	}
	// The same limits as create_principal's (bot.ParseScopes): a user_id
	// that is no space, and more than bot.MaxScopes of them.
	for s, want := range map[string]string{
		"patient_42,bad\x01id": "without control characters",
		strings.TrimSuffix(strings.Repeat("p,", bot.MaxScopes+1), ","): "at most 256 user_ids",
	} {
		_, _, err := runWith(t, nil, "keys", "create", "--config", e.cfg, "--name", "w", "--role", "agent", "--scopes", s)
		if err == nil || !strings.Contains(err.Error(), "--scopes:") || !strings.Contains(err.Error(), want) {
			t.Errorf("--scopes %.30q: err = %v, want %q", s, err, want)
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
		t.Errorf("a scoped key read another space: %s, want status 403", got)
	}
	e.MustOK(ward, "list_memories", map[string]any{"user_id": "patient_7"})
}

// scrapeMetrics reads /metrics of a server with no metrics token.
func scrapeMetrics(t *testing.T, e *testEnv) string {
	t.Helper()
	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestDecisionsTotalDoesNotCountIdenticalRetries(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	agent := e.CreateKey("deploy-bot", "agent")
	bob := e.CreateKey("bob", "member")
	e.Start()
	id := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}}).Data["request_id"]
	first := e.MustOK(bob, "approve_action", map[string]any{"request_id": id})
	again := e.MustOK(bob, "approve_action", map[string]any{"request_id": id})
	if first.Data["status"] != "approved" || !strings.HasPrefix(again.Text, "Already decided, as you decided it") {
		t.Fatalf("approve twice: %s / %s; want status approved, then a text with prefix %q", first, again, "Already decided, as you decided it")
	}
	m := scrapeMetrics(t, e)
	for _, want := range []string{
		`countersign_tool_calls_total{outcome="ok",tool="approve_action"} 2`,
		`countersign_decisions_total{outcome="approved",surface="http"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestAccessDeniedAuditKeepsTheSpaceTheCallNamed(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	admin := e.CreateKey("ops", "admin")
	viewer := e.CreateKey("reader", "viewer")
	e.Start()
	// A capability denial (a viewer may not write), naming patient_42.
	if r := e.Call(viewer, "remember", map[string]any{"user_id": "patient_42", "agent_id": "ward", "subject": "allergy", "value": "latex"}); r.Status != 403 {
		t.Fatalf("viewer remember: %s, want status 403", r)
	}
	log := e.MustOK(admin, "audit_log", map[string]any{"user_id": "patient_42", "agent_id": "ward"})
	if !strings.Contains(log.Text, "access_denied") || !strings.Contains(log.Text, "user=patient_42") || !strings.Contains(log.Text, "remember: Access denied") {
		t.Fatalf("the space's audit log hides its denial, want %q, %q and %q in:\n%s", "access_denied", "user=patient_42", "remember: Access denied", log.Text)
	}
}

func TestStdioMCPLogsUnauthenticatedCallsUnderItsSurface(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "auth_required: true\n")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &logtest.Buffer{}
	done := make(chan error, 1)
	go func() {
		// A key that authenticates nobody; the database's URL when the
		// tests run on PostgreSQL. (Without any key the server does not
		// start: TestStdioMCPWithoutAKeyNeitherDecidesNorAdministers.)
		getenv := func(k string) string {
			if k == "COUNTERSIGN_DATABASE_URL" {
				return e.env[k]
			}
			return ""
		}
		err := run(context.Background(), []string{"mcp", "--config", e.cfg, "--key", "cs_sk_nobody"}, getenv, inR, outW, stderr)
		outW.CloseWithError(io.EOF)
		done <- err
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "local-agent", Version: "1"}, nil).Connect(context.Background(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	if text, r := mcpCall(t, cs, "verify_audit", nil); !r.IsError || !strings.Contains(text, "unknown or revoked API key") {
		t.Fatalf("bad key: IsError = %v, text = %q; want an error containing %q", r.IsError, text, "unknown or revoked API key")
	}
	cs.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	logs := stderr.String()
	if !strings.Contains(logs, "mcp: the API key given does not authenticate; every call will be refused") || strings.Contains(logs, "surface=none") || strings.Contains(logs, "cs_sk_nobody") {
		t.Fatalf("the refused key is not logged as such (or the key is), want %q and no surface=none or cs_sk_nobody in:\n%s", "mcp: the API key given does not authenticate; every call will be refused", logs)
	}
}

func TestCallPrintsTextStatusJSONAndFields(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	agent := e.CreateKey("coder", "agent")
	e.Start()
	call := func(args ...string) (string, error) {
		out, _, err := runWith(t, map[string]string{apiKeyEnv: agent}, append([]string{"call", "--url", e.URL}, args...)...)
		return out, err
	}
	con, err := call("--field", "request_id", "request_approval", `{"action": "force-push main"}`)
	if err != nil || !strings.HasPrefix(con, "con_") || strings.Count(con, "\n") != 1 {
		t.Fatalf("--field request_id: %q %v, want one con_ line and no error", con, err)
	}
	out, err := call("record_approval", `{"action": "force-push main", "request_id": "`+strings.TrimSpace(con)+`"}`)
	if err != nil || !strings.HasPrefix(out, "Recorded "+strings.TrimSpace(con)) {
		t.Fatalf("text: %q %v, want no error and prefix %q", out, err, "Recorded "+strings.TrimSpace(con))
	}
	out, err = call("list_principals")
	if !errors.Is(err, errExit1) || !strings.HasPrefix(out, "403 Forbidden\nAccess denied: 'list_principals' requires the 'admin' capability") {
		t.Fatalf("a 403: %q %v, want errExit1 and prefix %q", out, err, "403 Forbidden\nAccess denied: 'list_principals' requires the 'admin' capability")
	}
	// A 400 names the argument at fault: the error, then the field.
	out, err = call("confirm_action", `{"tool": "restart_service", "arguments": {"service": "web"}, "summary": "a\u0007b"}`)
	if want := "400 Bad Request\nsummary: must not contain control characters other than tab and line breaks\nfield: summary\n"; !errors.Is(err, errExit1) || out != want {
		t.Fatalf("a 400:\n got %q %v\nwant %q", out, err, want)
	}
	out, err = call("--json", "get_approval_mode", `{}`)
	if err != nil || !strings.HasPrefix(out, `{"text":"Approval mode for user default: normal.`) {
		t.Fatalf("--json: %q %v, want no error and prefix %q", out, err, `{"text":"Approval mode for user default: normal.`)
	}
	if _, err := call("--field", "nope", "get_approval_mode", `{}`); err == nil || !strings.Contains(err.Error(), `no field "nope" (it has: mode, prompt, source, space)`) {
		t.Fatalf("--field nope: err = %v, want an error containing %q", err, `no field "nope" (it has: mode, prompt, source, space)`)
	}
	if _, _, err := runWith(t, nil, "call", "--url", e.URL, "get_approval_mode"); err == nil || !strings.Contains(err.Error(), "no API key") {
		t.Fatalf("no key: err = %v, want an error containing %q", err, "no API key")
	}
	e.Stop()
	if _, err := call("get_approval_mode"); err == nil || !strings.Contains(err.Error(), "no answer from") {
		t.Fatalf("server stopped: err = %v, want an error containing %q", err, "no answer from")
	}
	if _, _, err := runWith(t, nil, "ready", "--url", e.URL, "--timeout", "300ms"); err == nil || !strings.Contains(err.Error(), "did not become ready") {
		t.Fatalf("ready with no server: err = %v, want an error containing %q", err, "did not become ready")
	}
}
