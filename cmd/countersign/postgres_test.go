package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/config"
)

// testStoreEnv, set to postgres, runs every test server of this package on
// a fresh PostgreSQL database instead of a bbolt file (CI does it for the
// end-to-end tests: .ci/run).
const testStoreEnv = "COUNTERSIGN_TEST_STORE"

// testEngine is the store lines newTestEnv adds for testStoreEnv.
func testEngine(t *testing.T) string {
	if os.Getenv(testStoreEnv) == config.EnginePostgres {
		return "  engine: postgres\n"
	}
	return ""
}

// skipOnPostgres skips a test that works on the bbolt file itself when the
// package's servers run on PostgreSQL (it runs in the bbolt pass).
func skipOnPostgres(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(testStoreEnv) == config.EnginePostgres {
		t.Skipf("bbolt only (%s); it runs when %s is unset", why, testStoreEnv)
	}
}

// openTestStore opens the store of e's config, whichever the engine.
func (e *testEnv) openTestStore() storeHandle {
	e.t.Helper()
	cfg, err := config.Load(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	db, err := openEngine(context.Background(), cfg, e.getenv, false)
	if err != nil {
		e.t.Fatal(err)
	}
	return db
}

// testDSN is a fresh database on the test binary's cluster.
func testDSN(t *testing.T) string { return pgtest.DSN(t) }

// pgEnv is a test server on PostgreSQL (database dsn) with config.
func pgEnv(t *testing.T, dsn, config string) *testEnv {
	t.Helper()
	dir := t.TempDir()
	full := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") + "\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") + "\n" + config
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: path, env: map[string]string{"COUNTERSIGN_DATABASE_URL": dsn}}
	t.Cleanup(e.Stop)
	return e
}

func (e *testEnv) cli(args ...string) (string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), args, e.getenv, strings.NewReader(""), &out, &errb)
	return out.String() + errb.String(), err
}

// TestServeOnPostgresAndCopyBetweenEngines: a server on PostgreSQL takes
// writes and verdicts; `store copy` moves the store with its chain to
// bbolt and back into another database, where `audit verify` passes and a
// server goes on from the same state.
func TestServeOnPostgresAndCopyBetweenEngines(t *testing.T) {
	t.Parallel()
	e := pgEnv(t, testDSN(t), memoryConfig)
	if _, err := os.Stat(e.cfg); err != nil {
		t.Fatal(err)
	}
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	if r, err := http.Get(e.URL + "/readyz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("readyz on a live database: %v %v, want 200", r, err)
	}
	for _, v := range []string{"apixaban 5mg twice daily", "metformin 500mg"} {
		e.MustOK(agent, "remember", map[string]any{"user_id": "p1", "subject": "allergy_" + strings.Fields(v)[0], "value": v})
	}
	r := e.MustOK(agent, "check_before_act", map[string]any{"user_id": "p1", "subject": "allergy_apixaban"})
	if !strings.Contains(r.Text, "SAFE") {
		t.Fatalf("verdict on PostgreSQL: %s, want SAFE", r)
	}
	e.Stop()
	out, err := e.cli("audit", "verify", "--config", e.cfg)
	if err != nil || !strings.Contains(out, "INTACT") {
		t.Fatalf("audit verify on PostgreSQL: %v, want INTACT:\n%s", err, out)
	}
	entries := strings.Fields(out[strings.Index(out, "—"):])[1]

	// PostgreSQL → bbolt.
	boltDir := t.TempDir()
	boltCfg := filepath.Join(boltDir, "config.yaml")
	if err := os.WriteFile(boltCfg, []byte("listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(boltDir, "c.db")+"\n"+memoryConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = e.cli("store", "copy", "--from-config", e.cfg, "--to-config", boltCfg)
	if err != nil || !strings.Contains(out, "INTACT on the target — "+entries+" entries") {
		t.Fatalf("copy to bbolt: %v, want %q:\n%s", err, "INTACT on the target — "+entries+" entries", out)
	}
	out, err = e.cli("audit", "verify", "--config", boltCfg)
	if err != nil || !strings.Contains(out, entries+" entries verified") {
		t.Fatalf("audit verify on the bbolt copy: %v, want %q:\n%s", err, entries+" entries verified", out)
	}
	// Copying again into the same (now full) store is refused.
	if out, err = e.cli("store", "copy", "--from-config", e.cfg, "--to-config", boltCfg); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("copy into a full store: err = %v, want an error containing %q\n%s", err, "not empty", out)
	}

	// bbolt → another database, and a server there carries on.
	e2 := pgEnv(t, testDSN(t), memoryConfig)
	out, err = e2.cli("store", "copy", "--from-config", boltCfg, "--to-config", e2.cfg)
	if err != nil || !strings.Contains(out, "INTACT on the target — "+entries+" entries") {
		t.Fatalf("copy back to PostgreSQL: %v, want %q:\n%s", err, "INTACT on the target — "+entries+" entries", out)
	}
	e2.Start()
	r = e2.MustOK(agent, "check_before_act", map[string]any{"user_id": "p1", "subject": "allergy_metformin"})
	if !strings.Contains(r.Text, "SAFE") {
		t.Fatalf("verdict after the round trip: %s, want SAFE", r)
	}
	e2.MustOK(agent, "remember", map[string]any{"user_id": "p1", "subject": "allergy_x", "value": "y"})
	e2.Stop()
	out, err = e2.cli("audit", "verify", "--config", e2.cfg)
	if err != nil || !strings.Contains(out, "INTACT") {
		t.Fatalf("audit verify after new writes on the copy: %v, want INTACT:\n%s", err, out)
	}
}

// TestDatabaseDownFailsClosed: while PostgreSQL is stopped, /readyz is not
// ready, a verdict is a 503 with Retry-After (never SAFE, never a 500) and
// so is a write; once it is back the same server answers again by itself.
func TestDatabaseDownFailsClosed(t *testing.T) {
	t.Parallel()
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	defer c.Remove()
	dsn, err := c.CreateDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e := pgEnv(t, dsn, memoryConfig+"http:\n  rate_per_minute: 600000\n  rate_burst: 100000\n")
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	e.MustOK(agent, "remember", map[string]any{"user_id": "p1", "subject": "diet", "value": "no nuts"})
	// Calls keep coming while the database stops: each answer is a verdict
	// or a write from before, or a 503; never a 500.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tool, args := "check_before_act", map[string]any{"user_id": "p1", "subject": "diet"}
				if w%2 == 1 {
					tool, args = "remember", map[string]any{"user_id": "p1", "subject": fmt.Sprintf("s%d-%d", w, i), "value": "v"}
				}
				st, m, err := (&replica{URL: e.URL}).call(agent, tool, args)
				if err != nil {
					continue
				}
				text, _ := m["text"].(string)
				if st == http.StatusOK && tool == "check_before_act" && !strings.Contains(text, "SAFE") {
					t.Errorf("verdict %q with status 200, want SAFE", text)
				}
				mu.Lock()
				statuses[st]++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	for st := range statuses {
		if st != http.StatusOK && st != http.StatusServiceUnavailable {
			t.Fatalf("answers while the database stopped: %v; want only 200 and 503", statuses)
		}
	}
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Fatalf("answers while the database stopped: %v; want some 503", statuses)
	}
	resp, err := http.Get(e.URL + "/readyz")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz while the database is down: %v %v, want %d", resp, err, http.StatusServiceUnavailable)
	}
	resp.Body.Close()
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"check_before_act", map[string]any{"user_id": "p1", "subject": "diet"}},
		{"safe_recall", map[string]any{"user_id": "p1", "query": "diet"}},
		{"remember", map[string]any{"user_id": "p1", "subject": "diet", "value": "nuts ok"}},
	} {
		r := e.Call(agent, call.tool, call.args)
		if r.Status != http.StatusServiceUnavailable || strings.Contains(r.Raw, "SAFE") || strings.Contains(r.Raw, "ANSWERED") || !strings.Contains(r.Error, "store is unavailable") {
			t.Fatalf("%s while the database is down: %s; want 503, store unavailable", call.tool, r)
		}
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(e.URL + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz after the database is back: %v %v, want 200", resp, err)
	}
	resp.Body.Close()
	r := e.MustOK(agent, "check_before_act", map[string]any{"user_id": "p1", "subject": "diet"})
	if !strings.Contains(r.Text, "SAFE") {
		t.Fatalf("verdict after recovery: %s, want SAFE", r)
	}
	if strings.Contains(e.logs.String(), dsn) {
		t.Fatal("the DSN is in the log")
	}
}

// TestPostgresConfigProblems: the store section's mistakes are named by key.
func TestPostgresConfigProblems(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte("store:\n  engine: mysql\n  postgres:\n    dsn_env: \"postgres://u:p@h/db\"\n    max_conns: 2\n    statement_timeout: 1ms\n"), t.TempDir())
	if err == nil {
		t.Fatal("a bad store section loaded")
	}
	if strings.Contains(err.Error(), "u:p@h") {
		t.Errorf("the problems repeat a URL put in dsn_env: %v", err)
	}
	for _, want := range []string{"store.engine:", "store.postgres.dsn_env:", "store.postgres.max_conns:", "store.postgres.statement_timeout:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems %q do not name %s", err, want)
		}
	}
	cfg, err := config.Parse([]byte("store:\n  engine: postgres\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Store.Postgres; p.DSNEnv != "COUNTERSIGN_DATABASE_URL" || p.MaxConns != 10 || p.StatementTimeout != 5*time.Second {
		t.Fatalf("defaults: %+v, want DSNEnv COUNTERSIGN_DATABASE_URL, MaxConns 10, StatementTimeout 5s", p)
	}
	_, err = openEngine(context.Background(), cfg, func(string) string { return "" }, false)
	if err == nil || !strings.Contains(err.Error(), "$COUNTERSIGN_DATABASE_URL is empty") {
		t.Fatalf("no DSN in the environment: err = %v, want an error containing %q", err, "$COUNTERSIGN_DATABASE_URL is empty")
	}
}
