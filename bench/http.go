package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// BuildBinary builds the countersign command of the module at root into out,
// in that module (so with its own dependency versions, not this module's).
func BuildBinary(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/countersign")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, b)
	}
	return nil
}

// serverConfig is the config of the benchmarked server: the default's
// slots, rate limits out of the way, a tool with a short timeout for the
// sweeper, and a sweep every second.
const serverConfig = `listen: 127.0.0.1:0
store:
  path: %s
http:
  rate_per_minute: 1000000000
  rate_burst: 100000000
memory:
  slots:
    - {name: active_medication, category: active_medication, verbatim: true, multi: true, confirm: true}
    - {name: allergy, category: allergy, verbatim: true, multi: true}
  critical_categories: [allergy, active_medication]
tools:
  - {name: restart_service, category: mutating, timeout: 24h}
  - {name: flush_cache, category: mutating, timeout: %s}
approvals:
  remind_after: 0s
sweep:
  schedule: "@every 1s"
log:
  level: info
`

// Server is the real binary serving on a loopback port.
type Server struct {
	URL    string
	Key    string
	cmd    *exec.Cmd
	log    string
	client *http.Client
	Start  time.Duration // from exec to a 200 on /readyz
}

var listenRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// StartServer writes a config for store db into dir, creates an admin key
// (once per store) and starts bin; it returns once /readyz answers 200.
func StartServer(ctx context.Context, bin, dir, db string, fastTimeout time.Duration, key string) (*Server, error) {
	cfg := filepath.Join(dir, "config-"+filepath.Base(db)+".yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, serverConfig, db, fastTimeout), 0o600); err != nil {
		return nil, err
	}
	if key == "" {
		out, err := exec.CommandContext(ctx, bin, "keys", "create", "--config", cfg, "--name", "bench", "--role", "admin").Output()
		if err != nil {
			return nil, fmt.Errorf("keys create: %w", err)
		}
		key = strings.TrimSpace(string(out))
	}
	logPath := filepath.Join(dir, "server-"+filepath.Base(db)+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s := &Server{Key: key, log: logPath}
	t0 := time.Now()
	s.cmd = exec.Command(bin, "serve", "--config", cfg)
	s.cmd.Stderr = logf
	s.cmd.Stdout = logf
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 256, DisableCompression: true}}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if s.URL == "" {
			if b, _ := os.ReadFile(logPath); listenRE.Match(b) {
				s.URL = "http://" + string(listenRE.FindSubmatch(b)[1])
			}
		}
		if s.URL != "" {
			if resp, err := s.client.Get(s.URL + "/readyz"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					s.Start = time.Since(t0)
					return s, nil
				}
			}
		}
		if s.cmd.ProcessState != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	s.Stop()
	b, _ := os.ReadFile(logPath)
	return nil, fmt.Errorf("the server did not become ready:\n%s", b)
}

// Stop sends SIGTERM and waits.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Call posts a tool call and fails unless it answers 200.
func (s *Server) Call(tool string, body []byte) error {
	req, _ := http.NewRequest("POST", s.URL+"/v1/tools/"+tool, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d %s", tool, resp.StatusCode, b)
	}
	return nil
}

func (s *Server) get(path string) ([]byte, error) {
	resp, err := s.client.Get(s.URL + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return b, err
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Memory reads the server's Go heap from /metrics and its resident memory
// from /proc, split into anonymous (heap, stacks) and file-backed (the
// bbolt mmap, which the kernel can reclaim).
func (s *Server) Memory() (heapInuse, rssAnon, rssFile float64, err error) {
	b, err := s.get("/metrics")
	if err != nil {
		return 0, 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			heapInuse, _ = strconv.ParseFloat(v, 64)
		}
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return heapInuse, 0, 0, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		var kb float64
		if _, e := fmt.Sscanf(line, "RssAnon: %f kB", &kb); e == nil {
			rssAnon = kb * 1024
		}
		if _, e := fmt.Sscanf(line, "RssFile: %f kB", &kb); e == nil {
			rssFile = kb * 1024
		}
	}
	if heapInuse == 0 {
		return 0, rssAnon, rssFile, errors.New("/metrics has no go_memstats_heap_inuse_bytes")
	}
	return heapInuse, rssAnon, rssFile, nil
}

var checkBody = mustJSON(map[string]any{"subject": "allergy", "max_staleness_days": 365})

// seedGate gives the server's default space the G1 subject: 10 facts.
func (s *Server) seedGate() error {
	for i := 0; i < gateFacts; i++ {
		if err := s.Call("remember", mustJSON(map[string]any{"subject": "allergy", "value": fmt.Sprintf("allergen-%02d", i)})); err != nil {
			return err
		}
	}
	return nil
}

// RunG2 measures one client: n gate calls over one keep-alive connection,
// alternating with GET /healthz on the same connection (the transport's
// own cost, side by side).
func (s *Server) RunG2(res *Results, key string, n int) error {
	gate, health := &Sample{}, &Sample{}
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := s.Call("check_before_act", checkBody); err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := s.get("/healthz"); err != nil {
			return err
		}
		gate.Add(t1.Sub(t0))
		health.Add(time.Since(t1))
	}
	res.PutSample(key, gate)
	res.PutSample(key+".healthz", health)
	return nil
}

// RunG3 measures clients concurrent clients making n gate calls in all.
func (s *Server) RunG3(res *Results, clients, n int) error {
	lat := make([]Sample, clients)
	t0 := time.Now()
	err := parallel(clients, n, func(w, _ int) error {
		s0 := time.Now()
		err := s.Call("check_before_act", checkBody)
		lat[w].Add(time.Since(s0))
		return err
	})
	elapsed := time.Since(t0)
	if err != nil {
		return err
	}
	all := &Sample{}
	for i := range lat {
		all.Merge(&lat[i])
	}
	res.PutSample("G3", all)
	res.Put("G3.rate", float64(n)/elapsed.Seconds())
	return nil
}

// RunG4 measures the gate (one client, as G2) for d while writers make
// writesPerSec durable remember calls and the server's sweeper (every
// second) expires pending requests created just before, which fall due
// during the window.
func (s *Server) RunG4(res *Results, d time.Duration, writesPerSec, pending int) error {
	// Pending requests on the short-timeout tool: they fall due while we
	// measure, and the sweeper expires them in batches.
	if err := parallel(32, pending, func(w, i int) error {
		return s.Call("confirm_action", mustJSON(map[string]any{"tool": "flush_cache", "arguments": map[string]any{"n": i}}))
	}); err != nil {
		return err
	}
	stop := make(chan struct{})
	var wrote, werrs atomic.Int64
	var wg sync.WaitGroup
	const writers = 10
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Second * writers / time.Duration(writesPerSec))
			defer t.Stop()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				if err := s.Call("remember", mustJSON(rememberArgs(w, r.IntN(1<<30)))); err != nil {
					werrs.Add(1)
					continue
				}
				wrote.Add(1)
			}
		}()
	}
	gate := &Sample{}
	t0 := time.Now()
	var err error
	for time.Since(t0) < d {
		s0 := time.Now()
		if err = s.Call("check_before_act", checkBody); err != nil {
			break
		}
		gate.Add(time.Since(s0))
	}
	elapsed := time.Since(t0)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if werrs.Load() > 0 {
		return fmt.Errorf("G4: %d background writes failed", werrs.Load())
	}
	res.PutSample("G4", gate)
	res.Put("G4.writes.rate", float64(wrote.Load())/elapsed.Seconds())
	return nil
}

// RunM1 starts the server on the million-fact file, timing start-up; makes
// n recalls of random agents over HTTP; and reads its memory.
func RunM1Server(ctx context.Context, bin, dir string, m *Million, res *Results, n int) error {
	s, err := StartServer(ctx, bin, dir, m.Path, time.Minute, "")
	if err != nil {
		return err
	}
	s.Stop()
	// The key is created once; start again to time a plain start-up.
	s2, err := StartServer(ctx, bin, dir, m.Path, time.Minute, s.Key)
	if err != nil {
		return err
	}
	defer s2.Stop()
	res.Put("M1.startup.s", s2.Start.Seconds())
	r := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	lat := &Sample{}
	for i := 0; i < n; i++ {
		body := mustJSON(map[string]any{"agent_id": fmt.Sprintf("a%05d", r.IntN(m.Agents)), "question": recallQuestion})
		t0 := time.Now()
		if err := s2.Call("recall", body); err != nil {
			return err
		}
		lat.Add(time.Since(t0))
	}
	res.PutSample("M1.http.recall", lat)
	heap, anon, file, err := s2.Memory()
	if err != nil {
		return err
	}
	res.Put("M1.heap.MiB", heap/(1<<20))
	res.Put("M1.rss_anon.MiB", anon/(1<<20))
	res.Put("M1.rss_file.MiB", file/(1<<20))
	return nil
}
