package main

import (
	"bufio"
	"bytes"
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

	"github.com/countersign/countersign/internal/logtest"
)

// replica is one `countersign serve` process: this test binary run as the
// countersign binary (TestMain, COUNTERSIGN_TEST_AS_MAIN).
type replica struct {
	cmd  *exec.Cmd
	URL  string
	logs *logtest.Buffer
	done chan struct{}
}

func startReplica(t testing.TB, cfg string, env []string) *replica {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), append([]string{"COUNTERSIGN_TEST_AS_MAIN=1", "GOMAXPROCS=2"}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{cmd: cmd, logs: &logtest.Buffer{}, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			r.logs.Write([]byte(sc.Text() + "\n"))
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { r.kill() })
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("replica did not start:\n%s", r.logs.String())
		}
		r.URL = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("replica did not start:\n%s", r.logs.String())
	}
	return r
}

// kill ends the process at once (SIGKILL: no shutdown, no drain).
func (r *replica) kill() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-r.done
}

// call posts one tool call; it returns the status and the decoded answer.
func (r *replica) call(key, tool string, args any) (int, map[string]any, error) {
	b, _ := json.Marshal(args)
	req, _ := http.NewRequest("POST", r.URL+"/v1/tools/"+tool, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("not JSON: %s", raw)
	}
	return resp.StatusCode, out, nil
}

func data(m map[string]any) map[string]any { d, _ := m["data"].(map[string]any); return d }

// TestReplicasShareOnePostgres runs three serve processes on one database
// behind no balancer (the test picks the replica of each call):
//   - 50 requests each approved and denied at the same moment from two
//     replicas by two people end with one outcome (one 200, one 409) and
//     one outcome entry in the audit chain each;
//   - a long poll on one replica wakes on a decision made on another;
//   - the fake Slack gets one post per request and one update per decision,
//     whichever replica the call reached (the leader delivers);
//   - SIGKILL of the leader while writes run loses no acknowledged write,
//     another replica takes over delivery, and the chain verifies.
func TestReplicasShareOnePostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts three servers")
	}
	dsn := testDSN(t)
	f := newSlackFake(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	config := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") +
		"\nhttp:\n  rate_per_minute: 600000\n  rate_burst: 100000\nsweep:\n  schedule: \"@every 1s\"\n" +
		strings.Replace(slackConfig(f, "http"), "tools:\n", "tools:\n  - name: quick_op\n    category: destructive\n    approvers: {roles: [member]}\n    timeout: 5s\n", 1)
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"COUNTERSIGN_DATABASE_URL": dsn, "SLACK_BOT_TOKEN": "xoxb-e2e", "SLACK_SIGNING_SECRET": e2eSlackSecret}
	e := &testEnv{t: t, dir: dir, cfg: cfg, env: env}
	agent := e.CreateKey("deploy-bot", "agent")
	alice := e.CreateKey("alice", "member")
	bob := e.CreateKey("bob", "member")
	var envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	reps := []*replica{startReplica(t, cfg, envList), startReplica(t, cfg, envList), startReplica(t, cfg, envList)}
	leader := func() int {
		for i, r := range reps {
			if r.cmd.ProcessState == nil && strings.Count(r.logs.String(), "this replica leads") > strings.Count(r.logs.String(), "no longer leads") {
				return i
			}
		}
		return -1
	}
	waitFor(t, "a leader", func() bool { return leader() >= 0 })

	// A long poll on one replica wakes on a decision made on another.
	st, first, err := reps[0].call(agent, "confirm_action", actDelete(""))
	if err != nil || st != 200 {
		t.Fatalf("confirm_action: %d %v %v, want 200 and no error", st, first, err)
	}
	firstID := data(first)["request_id"].(string)
	polled := make(chan map[string]any, 1)
	go func() {
		_, m, _ := reps[1].call(agent, "action_status", map[string]any{"request_id": firstID, "wait_seconds": 55})
		polled <- m
	}()
	waitFor(t, "the long poll to wait", func() bool {
		_, m, _ := reps[1].call(agent, "action_status", map[string]any{"request_id": firstID})
		return data(m)["status"] == "pending"
	})
	time.Sleep(200 * time.Millisecond) // let the poll subscribe
	if st, m, err := reps[2].call(alice, "approve_action", map[string]any{"request_id": firstID}); err != nil || st != 200 {
		t.Fatalf("approve on replica 2: %d %v %v, want 200 and no error", st, m, err)
	}
	select {
	case m := <-polled:
		if data(m)["status"] != "approved" {
			t.Fatalf("long poll on replica 1 answered %v, want status approved", m)
		}
	case <-time.After(25 * time.Second):
		// The poll waits 55 s: an answer long before that is a wake-up.
		t.Fatal("the long poll on replica 1 did not wake on replica 2's decision")
	}

	// 50 requests, each approved by alice and denied by bob at once on two
	// different replicas.
	const n = 50
	ids := make([]string, n)
	for i := range n {
		st, m, err := reps[i%3].call(agent, "confirm_action", actDelete(""))
		if err != nil || st != 200 {
			t.Fatalf("confirm_action %d: %d %v %v, want 200 and no error", i, st, m, err)
		}
		ids[i] = data(m)["request_id"].(string)
	}
	type outcome struct{ approve, deny int }
	outs := make([]outcome, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		for _, who := range []int{0, 1} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				key, tool, rep := alice, "approve_action", reps[i%3]
				args := map[string]any{"request_id": ids[i]}
				if who == 1 {
					key, tool, rep = bob, "deny_action", reps[(i+1)%3]
					args["reason"] = "not today"
				}
				st, m, err := rep.call(key, tool, args)
				if err != nil || (st != 200 && st != 409) {
					t.Errorf("%s %s: %d %v %v, want 200 or 409 and no error", tool, ids[i], st, m, err)
					return
				}
				if who == 0 {
					outs[i].approve = st
				} else {
					outs[i].deny = st
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	winners := map[string]string{}
	for i, o := range outs {
		switch {
		case o.approve == 200 && o.deny == 409:
			winners[ids[i]] = "approved"
		case o.approve == 409 && o.deny == 200:
			winners[ids[i]] = "denied"
		default:
			t.Fatalf("request %s: approve %d, deny %d; want one 200 and one 409", ids[i], o.approve, o.deny)
		}
		_, m, _ := reps[(i+2)%3].call(agent, "action_status", map[string]any{"request_id": ids[i]})
		if data(m)["status"] != winners[ids[i]] {
			t.Fatalf("request %s is %v, want %s (the call that won)", ids[i], data(m)["status"], winners[ids[i]])
		}
	}

	// SIGKILL the leader while writes run on every replica: every
	// acknowledged write is there afterwards. Requests due in 5 s are
	// expired by the next leader, once each.
	var quick []string
	for i := range 5 {
		st, m, err := reps[i%3].call(agent, "confirm_action", map[string]any{"tool": "quick_op", "summary": "quick", "category": "destructive", "dry_run": "nothing"})
		if err != nil || st != 200 || data(m)["status"] != "pending" {
			t.Fatalf("confirm_action quick_op: %d %v %v, want 200 with status pending and no error", st, m, err)
		}
		quick = append(quick, data(m)["request_id"].(string))
	}
	lead := leader()
	var acked []string
	unsure := 0 // calls without an answer: the write may have committed all the same
	var mu sync.Mutex
	stop := make(chan struct{})
	var ww sync.WaitGroup
	for w := range 6 {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st, m, err := reps[w%3].call(agent, "confirm_action", actDelete(""))
				mu.Lock()
				if err == nil && st == 200 {
					acked = append(acked, data(m)["request_id"].(string))
				} else if err != nil {
					unsure++
				}
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "writes under way", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 10 })
	reps[lead].kill()
	waitFor(t, "more writes after the kill", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 30 })
	close(stop)
	ww.Wait()
	waitFor(t, "another replica to lead", func() bool { l := leader(); return l >= 0 && l != lead })
	alive := reps[(lead+1)%3]
	for _, id := range acked {
		st, m, err := alive.call(agent, "action_status", map[string]any{"request_id": id})
		if err != nil || st != 200 || data(m)["status"] != "pending" {
			t.Fatalf("acknowledged request %s after the kill: %d %v %v, want 200 with status pending and no error", id, st, m, err)
		}
	}

	for _, id := range quick {
		waitFor(t, "the next leader to expire "+id, func() bool {
			_, m, _ := alive.call(agent, "action_status", map[string]any{"request_id": id})
			return data(m)["status"] != "pending"
		})
	}

	// Slack: one post per request and one update per decision, from
	// whichever replica leads. Delivery is at least once, as after any
	// crash: the one event the killed leader had in flight may go out
	// twice, nothing else.
	items := 1 + n + len(quick) + len(acked)
	postsPerItem := func() map[string]int {
		out := map[string]int{}
		for _, c := range f.Calls("chat.postMessage") {
			if m := itemRE.FindStringSubmatch(c.Form.Get("blocks")); m != nil {
				out[m[1]]++
			}
		}
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(postsPerItem()) < items && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := len(postsPerItem()); got < items {
		calls := f.Calls("chat.postMessage")
		sample := ""
		if len(calls) > 0 {
			sample = calls[0].Form.Get("blocks")
		}
		for i, r := range reps {
			for _, l := range strings.Split(r.logs.String(), "\n") {
				if strings.Contains(l, "outbox") || strings.Contains(l, "lead") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
					t.Logf("replica %d: %s", i, l)
				}
			}
		}
		for item, c := range postsPerItem() {
			if c > 1 {
				t.Logf("item %s posted %d times", item, c)
			}
		}
		t.Fatalf("%d of %d requests posted (%d posts), want all; a post: %.100s", got, items, len(calls), sample)
	}
	waitFor(t, "every decision's update", func() bool { return len(f.Calls("chat.update")) >= 1+n+len(quick) })
	time.Sleep(2 * time.Second) // a duplicate from another replica would come about now
	twice := 0
	for item, c := range postsPerItem() {
		if c > 1 {
			twice++
			t.Logf("item %s posted %d times", item, c)
		}
	}
	// A call cut off by the kill may still have committed: its request
	// exists and is posted, though the caller never heard of it.
	if got := len(postsPerItem()); got < items || got > items+unsure || twice > 1 {
		t.Errorf("%d requests posted (want %d, or up to %d more for calls cut off by the kill), %d of them more than once (want at most the one in flight at the kill)", got, items, unsure, twice)
	}
	if u := len(f.Calls("chat.update")); u < 1+n+len(quick) || u > 2+n+len(quick) {
		t.Errorf("%d chat.update calls for %d decisions, want %d or %d", u, 1+n+len(quick), 1+n+len(quick), 2+n+len(quick))
	}

	// One outcome entry per request in one chain, which verifies.
	for _, r := range reps {
		r.kill()
	}
	out, err := e.cli("audit", "verify", "--config", cfg)
	if err != nil || !strings.Contains(out, "INTACT") {
		t.Fatalf("audit verify: %v, want no error and %q in:\n%s", err, "INTACT", out)
	}
	out, err = e.cli("audit", "export", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	decisions := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var en struct{ Action, Detail string }
		if json.Unmarshal([]byte(line), &en) != nil {
			continue
		}
		switch en.Action {
		case "action_requested", "action_vote", "action_reminder", "action_escalated", "action_auto_approved":
		default:
			if strings.HasPrefix(en.Action, "action_") {
				decisions[strings.TrimSuffix(strings.Fields(en.Detail)[0], ":")+" "+strings.TrimPrefix(en.Action, "action_")]++
			}
		}
	}
	for _, id := range quick {
		if got := decisionsFor(decisions, id); len(got) != 1 || sum(got) != 1 {
			t.Errorf("expired request %s: audit outcomes %v, want one", id, got)
		}
	}
	for _, id := range ids {
		if decisions[id+" "+winners[id]] != 1 || len(decisionsFor(decisions, id)) != 1 {
			t.Errorf("request %s: audit outcomes %v, want one %s", id, decisionsFor(decisions, id), winners[id])
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// itemRE finds the item number a chat message carries.
var itemRE = regexp.MustCompile(`Item #(\d+)`)

func decisionsFor(d map[string]int, id string) map[string]int {
	out := map[string]int{}
	for k, v := range d {
		if strings.HasPrefix(k, id+" ") {
			out[k] = v
		}
	}
	return out
}

// TestReplicasOneSocketModeConnection: with Slack Socket Mode, of three
// replicas only the leader connects; when it dies, the next leader does.
func TestReplicasOneSocketModeConnection(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts three servers")
	}
	dsn := testDSN(t)
	f := newSlackFake(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	config := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") + "\n" + slackConfig(f, "socket")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"COUNTERSIGN_DATABASE_URL=" + dsn, "SLACK_BOT_TOKEN=xoxb-e2e", "SLACK_APP_TOKEN=xapp-e2e"}
	reps := []*replica{startReplica(t, cfg, env), startReplica(t, cfg, env), startReplica(t, cfg, env)}
	leader := func() int {
		for i, r := range reps {
			if r.cmd.ProcessState == nil && strings.Count(r.logs.String(), "this replica leads") > strings.Count(r.logs.String(), "no longer leads") {
				return i
			}
		}
		return -1
	}
	waitFor(t, "a leader's connection", func() bool { return leader() >= 0 && len(f.Calls("apps.connections.open")) >= 1 })
	time.Sleep(2 * time.Second) // the followers would have connected by now
	if n := len(f.Calls("apps.connections.open")); n != 1 {
		t.Fatalf("%d Socket Mode connections opened by three replicas, want 1 (the leader's)", n)
	}
	lead := leader()
	reps[lead].kill()
	waitFor(t, "the next leader's connection", func() bool {
		l := leader()
		return l >= 0 && l != lead && len(f.Calls("apps.connections.open")) == 2
	})
}
