package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/internal/logtest"
)

// testEnv is a config file and store in a temp dir, and a real server
// started through run() on a free loopback port.
type testEnv struct {
	t      *testing.T
	dir    string
	cfg    string // path of config.yaml
	env    map[string]string
	URL    string
	cancel context.CancelFunc
	done   chan error
	logs   *logtest.Buffer
	// scanned is closed when the log reader of the current run has ended.
	scanned chan struct{}
	// serveFlags are added to `serve --config FILE` by Start.
	serveFlags []string
	// clock, when set, is the server's clock (withClock).
	clock func() time.Time
	// mcpLogs is the stderr of the last `countersign mcp` run by runMCP.
	mcpLogs *logtest.Buffer
}

// newTestEnv writes yamlText (a config) into a temp dir. listen and
// store.path are forced to a free port and a file in the temp dir.
func newTestEnv(t *testing.T, yamlText string) *testEnv {
	t.Helper()
	dir := t.TempDir()
	full := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(dir, "countersign.db") + "\n" + testEngine(t) + yamlText
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: path, env: map[string]string{}}
	if os.Getenv(testStoreEnv) == config.EnginePostgres {
		e.env["COUNTERSIGN_DATABASE_URL"] = testDSN(t)
	}
	t.Cleanup(e.Stop)
	return e
}

func (e *testEnv) getenv(k string) string { return e.env[k] }

// CreateKey runs `countersign keys create` (the server must be stopped) and
// returns the key it printed.
func (e *testEnv) CreateKey(name, role string, extra ...string) string {
	e.t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"keys", "create", "--config", e.cfg, "--name", name, "--role", role}, extra...)
	if err := run(context.Background(), args, e.getenv, strings.NewReader(""), &out, &errb); err != nil {
		e.t.Fatalf("keys create %s: %v (%s)", name, err, errb.String())
	}
	key := strings.TrimSpace(out.String())
	if !strings.HasPrefix(key, "cs_sk_") || strings.Contains(key, "\n") {
		e.t.Fatalf("keys create printed %q, want only a key", out.String())
	}
	return key
}

var listenRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// Start runs the server and waits until it answers /healthz.
func (e *testEnv) Start() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if e.clock != nil {
		ctx = withClock(ctx, e.clock)
	}
	logs, done, scanned := &logtest.Buffer{}, make(chan error, 1), make(chan struct{})
	e.cancel, e.done, e.logs, e.scanned = cancel, done, logs, scanned
	pr, pw := io.Pipe()
	go func() {
		err := run(ctx, append([]string{"serve", "--config", e.cfg}, e.serveFlags...), e.getenv, strings.NewReader(""), io.Discard, pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	addr := make(chan string, 1)
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			logs.Write([]byte(line + "\n"))
			if m := listenRE.FindStringSubmatch(line); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
	}()
	a, ok := <-addr
	if !ok {
		err := <-done
		e.t.Fatalf("server did not start: %v\n%s", err, e.logs.String())
	}
	e.URL = "http://" + a
	resp, err := http.Get(e.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		e.t.Fatalf("healthz: err %v, want status 200", err)
	}
	resp.Body.Close()
}

// Stop shuts the server down and waits for run to return.
func (e *testEnv) Stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("server exited with %v\n%s", err, e.logs.String())
		}
	case <-time.After(30 * time.Second):
		e.t.Errorf("server did not stop\n%s", e.logs.String())
	}
	<-e.scanned
	e.cancel = nil
}

// toolResponse is a decoded answer of POST /v1/tools/{name}.
type toolResponse struct {
	Status int
	Text   string
	Data   map[string]any
	Error  string
	Field  string
	Raw    string
}

// Call posts args (a JSON string or a value to marshal) to tool with key.
func (e *testEnv) Call(key, tool string, args any) toolResponse {
	e.t.Helper()
	var body []byte
	switch a := args.(type) {
	case string:
		body = []byte(a)
	case nil:
		body = []byte("{}")
	default:
		var err error
		if body, err = json.Marshal(a); err != nil {
			e.t.Fatal(err)
		}
	}
	req, _ := http.NewRequest("POST", e.URL+"/v1/tools/"+tool, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s: %v", tool, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Text  string         `json:"text"`
		Data  map[string]any `json:"data"`
		Error string         `json:"error"`
		Field string         `json:"field"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		e.t.Fatalf("%s: answer is not JSON: %s", tool, raw)
	}
	return toolResponse{Status: resp.StatusCode, Text: r.Text, Data: r.Data, Error: r.Error, Field: r.Field, Raw: string(raw)}
}

// MustOK calls tool and fails the test unless it answers 200.
func (e *testEnv) MustOK(key, tool string, args any) toolResponse {
	e.t.Helper()
	r := e.Call(key, tool, args)
	if r.Status != 200 {
		e.t.Fatalf("%s: status %d, want 200: %s", tool, r.Status, r.Raw)
	}
	return r
}

func (r toolResponse) String() string { return fmt.Sprintf("%d %s", r.Status, r.Raw) }
