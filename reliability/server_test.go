package reliability

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
)

// binary is the countersign command built once for the package's tests.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func countersignBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "countersign-reliability-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "countersign")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/countersign/countersign/cmd/countersign")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// child is the real binary serving a config in a temp dir.
type child struct {
	t      *testing.T
	bin    string
	dir    string
	cfg    string
	db     string
	env    []string
	prefix string // a shell line to run before exec (ulimit)
	cmd    *exec.Cmd
	done   chan error
	log    *bytes.Buffer
	logMu  *sync.Mutex
	URL    string
	client *http.Client
}

// newChild writes config (after listen and store) into a temp dir.
func newChild(t *testing.T, config string, env ...string) *child {
	t.Helper()
	dir := t.TempDir()
	c := &child{t: t, bin: countersignBinary(t), dir: dir, db: filepath.Join(dir, "countersign.db"), env: env,
		log: &bytes.Buffer{}, logMu: &sync.Mutex{},
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	c.cfg = filepath.Join(dir, "config.yaml")
	full := "listen: 127.0.0.1:0\nstore:\n  path: " + c.db + "\n" + config
	if err := os.WriteFile(c.cfg, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.kill() })
	return c
}

// key creates an API key with the server stopped.
func (c *child) key(name, role string) string {
	c.t.Helper()
	cmd := exec.Command(c.bin, "keys", "create", "--config", c.cfg, "--name", name, "--role", role)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("keys create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (c *child) logs() string {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return c.log.String()
}

var listenRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// start runs the server and waits until /readyz answers 200.
func (c *child) start() {
	c.t.Helper()
	c.logMu.Lock()
	c.log.Reset()
	c.logMu.Unlock()
	if c.prefix != "" {
		c.cmd = exec.Command("/bin/sh", "-c", c.prefix+"; exec \"$0\" serve --config \"$1\"", c.bin, c.cfg)
	} else {
		c.cmd = exec.Command(c.bin, "serve", "--config", c.cfg)
	}
	c.cmd.Env = append(os.Environ(), c.env...)
	w := lockedWriter{c.logMu, c.log}
	c.cmd.Stdout, c.cmd.Stderr = w, w
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(c.cmd, c.done)
	deadline := time.Now().Add(30 * time.Second)
	c.URL = ""
	for time.Now().Before(deadline) {
		if m := listenRE.FindStringSubmatch(c.logs()); m != nil {
			c.URL = "http://" + m[1]
			if resp, err := c.client.Get(c.URL + "/readyz"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return
				}
			}
		}
		select {
		case err := <-c.done:
			c.done <- err
			c.t.Fatalf("the server exited at start: %v\n%s", err, c.logs())
		case <-time.After(5 * time.Millisecond):
		}
	}
	c.t.Fatalf("the server did not become ready\n%s", c.logs())
}

// kill sends SIGKILL and waits for the process to go.
func (c *child) kill() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
	c.cmd = nil
}

// stop sends SIGTERM and waits; it returns the exit error.
func (c *child) stop() error {
	if c.cmd == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-c.done:
	case <-time.After(30 * time.Second):
		c.t.Errorf("the server did not stop on SIGTERM\n%s", c.logs())
		_ = c.cmd.Process.Kill()
		err = <-c.done
	}
	c.cmd = nil
	return err
}

// answer is a decoded tool response.
type answer struct {
	Status int
	Data   map[string]any
	Error  string
	Raw    string
}

// call posts a tool call; a transport error (the server died) is returned.
func (c *child) call(ctx context.Context, key, tool string, args any) (answer, error) {
	body, _ := json.Marshal(args)
	req, err := http.NewRequestWithContext(ctx, "POST", c.URL+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err // cut off mid-answer: not acknowledged
	}
	var a struct {
		Data  map[string]any `json:"data"`
		Error string         `json:"error"`
	}
	_ = json.Unmarshal(raw, &a)
	return answer{Status: resp.StatusCode, Data: a.Data, Error: a.Error, Raw: string(raw)}, nil
}

func (c *child) mustCall(key, tool string, args any) answer {
	c.t.Helper()
	a, err := c.call(context.Background(), key, tool, args)
	if err != nil || a.Status != 200 {
		c.t.Fatalf("%s: err %v, status %d, want 200: %s", tool, err, a.Status, a.Raw)
	}
	return a
}

// publicKey reads the audit signing key the server created.
func (c *child) publicKey() ed25519.PublicKey {
	c.t.Helper()
	b, err := os.ReadFile(c.db + ".sign.key")
	if err != nil {
		c.t.Fatal(err)
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		c.t.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}

// checkStore opens the stopped server's file: the bbolt consistency check
// must be clean and the audit chain must verify. fn may read the store.
func (c *child) checkStore(fn func(db *bolt.DB)) {
	c.t.Helper()
	db, err := bolt.Open(c.db, bolt.Options{ReadOnly: true})
	if err != nil {
		c.t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		c.t.Fatalf("bbolt consistency check: %v", err)
	}
	rep, err := approvals.Verify(context.Background(), db, c.publicKey())
	if err != nil {
		c.t.Fatal(err)
	}
	if !rep.Intact {
		c.t.Fatalf("audit chain broken at %d: %s", rep.BrokenAt, rep.Reason)
	}
	if fn != nil {
		fn(db)
	}
}
