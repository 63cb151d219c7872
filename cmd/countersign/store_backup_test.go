package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/config"
)

// drillConfig lifts the rate limits so that the writers of the drill are
// never refused.
const drillConfig = "http:\n  rate_per_minute: 1000000\n  rate_burst: 100000\n"

// ackedWrite is a remember call the server acknowledged (200).
type ackedWrite struct {
	id    uint64
	value string
}

// remember stores one fact over HTTP; it is safe in a goroutine (no t).
func remember(url, key, userID, subject, value string) (uint64, error) {
	body, _ := json.Marshal(map[string]any{"user_id": userID, "subject": subject, "value": value})
	req, _ := http.NewRequest("POST", url+"/v1/tools/remember", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			MemoryID uint64 `json:"memory_id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || r.Data.MemoryID == 0 {
		return 0, fmt.Errorf("remember %s: status %d, %v", value, resp.StatusCode, err)
	}
	return r.Data.MemoryID, nil
}

// TestBackupRestoreDrill is the restore drill of docs/operations.md against
// the real server: four agents write facts without pause while `store
// backup` takes a copy over HTTP; `store restore` makes it the store of a
// fresh config (with the signing key restored beside it); `audit verify`
// says the chain is intact; and a server started on the restored store
// answers every write acknowledged before the backup began, holds for each
// agent an unbroken run of its writes (one moment of the store: no write
// without the writes acknowledged before it), and the record of the backup
// itself.
func TestBackupRestoreDrill(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "bbolt's online backup; PostgreSQL's is pg_dump")
	e := newTestEnv(t, drillConfig)
	admin := e.CreateKey("ops", "admin")
	const writers = 4
	var agents [writers]string
	for w := range writers {
		agents[w] = e.CreateKey(fmt.Sprintf("ward_bot_%d", w), "agent")
	}
	e.Start()

	var mu sync.Mutex
	acked := make([][]ackedWrite, writers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				value := fmt.Sprintf("w%d-%d", w, i)
				id, err := remember(e.URL, agents[w], fmt.Sprintf("patient_%d", w), fmt.Sprintf("note_%d", i), value)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked[w] = append(acked[w], ackedWrite{id, value})
				mu.Unlock()
			}
		}()
	}
	count := func(w int) int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked[w])
	}
	// Under load: every writer has written some before the backup begins.
	for w := range writers {
		for count(w) < 20 {
			select {
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	var before [writers]int
	for w := range writers {
		before[w] = count(w)
	}

	backup := filepath.Join(t.TempDir(), "countersign-backup.db")
	out, err := e.runCmd("store", "backup", "--to", backup, "--url", e.URL, "--key", admin)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err != nil {
		t.Fatalf("store backup under load: %v", err)
	}
	if !strings.HasPrefix(out, "✓ Backed up ") || !strings.Contains(out, "Audit chain INTACT in the copy") {
		t.Fatalf("store backup printed %q, want ✓ Backed up … Audit chain INTACT in the copy", out)
	}
	if st, err := os.Stat(backup); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the backup file: %v, mode %v; want it there, mode 0600 (it holds the whole store)", err, st.Mode().Perm())
	}
	e.Stop()

	// A fresh store: a new directory, the signing key restored beside it.
	dir := t.TempDir()
	key, err := os.ReadFile(filepath.Join(e.dir, "countersign.db.sign.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sign.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(dir, "restored.db")+"\naudit:\n  signing_key: "+filepath.Join(dir, "sign.key")+"\n"+drillConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &testEnv{t: t, dir: dir, cfg: cfg, env: map[string]string{}}
	t.Cleanup(r.Stop)
	out, err = r.runCmd("store", "restore", "--from", backup, "--config", cfg)
	if err != nil || !strings.HasPrefix(out, "✓ Restored ") {
		t.Fatalf("store restore: %v, want no error and output starting %q:\n%s", err, "✓ Restored ", out)
	}
	out, err = r.runCmd("audit", "verify", "--config", cfg)
	if err != nil || !strings.HasPrefix(out, "✓ Audit chain INTACT") {
		t.Fatalf("audit verify of the restored store: %v, want no error and output starting %q:\n%s", err, "✓ Audit chain INTACT", out)
	}
	out, err = r.runCmd("audit", "export", "--config", cfg)
	if err != nil || !strings.Contains(out, `"store_backup"`) || !strings.Contains(out, "ops [") {
		t.Fatalf("audit export of the restored store: %v; want the store_backup entry of ops in it", err)
	}

	r.Start()
	for w := range writers {
		missing := 0
		for i, a := range acked[w] {
			got := r.Call(agents[w], "get_memory", map[string]any{"user_id": fmt.Sprintf("patient_%d", w), "memory_id": a.id})
			switch {
			case got.Status == 200 && got.Data["value"] == a.value:
				if missing > 0 {
					t.Errorf("writer %d: write %d (#%d) is in the restored store, but %d write(s) acknowledged before it are not", w, i, a.id, missing)
				}
			case got.Status == 404 && i >= before[w]:
				missing++ // acknowledged during the backup: after its moment
			default:
				t.Errorf("writer %d: write %d (#%d, acknowledged %s the backup began): got %s, want 200 with value %q", w, i, a.id, map[bool]string{true: "before", false: "after"}[i < before[w]], got, a.value)
			}
		}
		t.Logf("writer %d: %d writes acknowledged, %d before the backup, %d in the restored store", w, len(acked[w]), before[w], len(acked[w])-missing)
	}
}

// TestBackupRefusals: the route refuses a request without a key, an agent's
// key and an auditor's (who reads the whole chain, but not the store), each
// with why; the command
// never overwrites a file, keeps nothing when refused, and `store restore`
// never writes over a store. On PostgreSQL the route answers 409 naming
// pg_dump.
func TestBackupRefusals(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	admin := e.CreateKey("ops", "admin")
	agent := e.CreateKey("ward_bot", "agent")
	auditor := e.CreateKey("reviewer", "auditor")
	e.Start()
	get := func(key string) (int, string) {
		req, _ := http.NewRequest("GET", e.URL+client.BackupPath, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if os.Getenv(testStoreEnv) == config.EnginePostgres {
		if st, body := get(admin); st != http.StatusConflict || !strings.Contains(body, "pg_dump") {
			t.Fatalf("backup on PostgreSQL: %d %s; want 409 naming pg_dump", st, body)
		}
		return
	}
	for _, c := range []struct {
		name, key string
		status    int
		want      string
	}{
		{"no key", "", http.StatusUnauthorized, ""},
		{"an agent's key", agent, http.StatusForbidden, "only an admin key that is not limited to some user_ids may take one (ward_bot ["},
		{"an auditor's key", auditor, http.StatusForbidden, "(reviewer ["},
	} {
		if st, body := get(c.key); st != c.status || !strings.Contains(body, c.want) {
			t.Errorf("backup with %s: %d %s; want %d containing %q", c.name, st, body, c.status, c.want)
		}
	}

	req, _ := http.NewRequest("HEAD", e.URL+client.BackupPath, nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("HEAD %s: %v %v, want 400 (a backup is taken with GET)", client.BackupPath, err, resp)
	}

	dir := t.TempDir()
	to := filepath.Join(dir, "b.db")
	_, err := e.runCmd("store", "backup", "--to", to, "--url", e.URL, "--key", agent)
	if err == nil || !strings.Contains(err.Error(), "403 Forbidden: Access denied") {
		t.Errorf("store backup with an agent's key: %v, want the server's 403 and why", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a refused backup left %d file(s) in the target directory, want none", len(left))
	}
	// A pinned key that cannot be one (not hex, or all zero) is refused
	// before anything is downloaded.
	for _, pin := range []string{"not-hex", strings.Repeat("00", 32)} {
		_, err = e.runCmd("store", "backup", "--to", to, "--url", e.URL, "--key", admin, "--pubkey", pin)
		if err == nil || !strings.HasPrefix(err.Error(), "--pubkey: ") {
			t.Errorf("store backup --pubkey %s: %v, want --pubkey refused", pin, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a refused --pubkey left %d file(s) in the target directory, want none", len(left))
	}
	if err := os.WriteFile(to, []byte("last night's backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.runCmd("store", "backup", "--to", to, "--url", e.URL, "--key", admin)
	if err == nil || !strings.Contains(err.Error(), "already exists; a backup never overwrites a file") {
		t.Errorf("store backup onto an existing file: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(to); string(b) != "last night's backup" {
		t.Errorf("the existing file now holds %q, want %q", b, "last night's backup")
	}
	good := filepath.Join(dir, "good.db")
	if _, err := e.runCmd("store", "backup", "--to", good, "--url", e.URL, "--key", admin); err != nil {
		t.Fatal(err)
	}
	e.Stop()
	// The config's own store exists: restore refuses to write over it.
	_, err = e.runCmd("store", "restore", "--from", good, "--config", e.cfg)
	if err == nil || !strings.Contains(err.Error(), "already exists; a restore makes a new store") {
		t.Errorf("store restore over the live store: %v, want a refusal", err)
	}
	// A file that is not a backup is refused before anything is written.
	os.Remove(filepath.Join(e.dir, "countersign.db"))
	_, err = e.runCmd("store", "restore", "--from", to, "--config", e.cfg)
	if err == nil || !strings.Contains(err.Error(), "is not a good backup for this config, and nothing was written") {
		t.Errorf("store restore of a text file: %v, want a refusal", err)
	}
	if fileExists(filepath.Join(e.dir, "countersign.db")) {
		t.Error("a refused restore created the store file")
	}
}

// TestBackupRouteIsTheClients: the server's backup route and key header
// are the ones client.API.Backup asks for (client imports nothing of the
// server, so each holds its own copy).
func TestBackupRouteIsTheClients(t *testing.T) {
	t.Parallel()
	if webhook.BackupPath != client.BackupPath || webhook.BackupKeyHeader != client.BackupKeyHeader {
		t.Errorf("server %s %s, client %s %s: want the same route and header", webhook.BackupPath, webhook.BackupKeyHeader, client.BackupPath, client.BackupKeyHeader)
	}
}
