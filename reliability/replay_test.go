package reliability

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/kv"
)

// fakePlatform answers every Slack and Discord API call with success.
func fakePlatform(t *testing.T) *httptest.Server {
	var n int
	var mu sync.Mutex
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		id := n
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/channels/") { // Discord
			fmt.Fprintf(w, `{"id":"%d","channel_id":"223344556677889900"}`, 900000000000000000+id)
			return
		}
		fmt.Fprintf(w, `{"ok":true,"channel":"C0123ABCD","ts":"1700000000.%06d"}`, id)
	}))
	t.Cleanup(s.Close)
	return s
}

const replayConfig = `http:
  rate_per_minute: 100000000
  rate_burst: 10000000
tools:
  - {name: restart_service, category: mutating, timeout: 24h}
slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: %[1]s/api/
  channels: {default: C0123ABCD}
discord:
  mode: http
  bot_token_env: DISCORD_BOT_TOKEN
  public_key_env: DISCORD_PUBLIC_KEY
  application_id: "998877665544332211"
  api_url: %[1]s/api/v10/
  channels: {default: "223344556677889900"}
principals:
  - {name: dr_smith, role: member, slack: U0123ABC, discord: "112233445566778899"}
sweep:
  schedule: "@every 1h"
`

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// slackRequest signs body as Slack does (v0, HMAC-SHA256 over
// "v0:<ts>:<body>") at timestamp ts.
func slackRequest(t *testing.T, url string, body []byte, ts int64, mutate func(sig string, body []byte) (string, []byte)) *http.Request {
	mac := hmac.New(sha256.New, []byte(slackSecret))
	fmt.Fprintf(mac, "v0:%d:%s", ts, body)
	sig := "v0=" + hex.EncodeToString(mac.Sum(nil))
	if mutate != nil {
		sig, body = mutate(sig, body)
	}
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", sig)
	return req
}

func slackClick(item uint64, trigger string) []byte {
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": trigger,
		"user":      map[string]any{"id": "U0123ABC", "team_id": "T1"},
		"container": map[string]any{"channel_id": "C0123ABCD"},
		"actions":   []any{map[string]any{"block_id": "countersign", "action_id": "countersign.approve", "value": strconv.FormatUint(item, 10), "action_ts": "1700000000.1"}},
	})
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}

func discordRequest(t *testing.T, u string, key ed25519.PrivateKey, body []byte, ts int64, mutate func(sig string, body []byte) (string, []byte)) *http.Request {
	tss := strconv.FormatInt(ts, 10)
	sig := hex.EncodeToString(ed25519.Sign(key, append([]byte(tss), body...)))
	if mutate != nil {
		sig, body = mutate(sig, body)
	}
	req, err := http.NewRequest("POST", u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature-Ed25519", sig)
	req.Header.Set("X-Signature-Timestamp", tss)
	return req
}

func discordClick(item uint64, interaction string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": 3, "id": interaction, "application_id": "998877665544332211", "token": "tok-" + interaction, "version": 1,
		"channel_id": "223344556677889900", "guild_id": "1",
		"member":  map[string]any{"user": map[string]any{"id": "112233445566778899", "username": "smith"}, "roles": []any{}},
		"message": map[string]any{"id": "900000000000000001", "channel_id": "223344556677889900"},
		"data":    map[string]any{"custom_id": fmt.Sprintf("cs:approve:%d", item), "component_type": 2},
	})
	return b
}

func send(t *testing.T, c *child, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReplayedDeliveries replays signed Slack and Discord button clicks 2
// to 10 times, sequentially and concurrently: each click is applied once
// (one decision, one audit entry). Tampered bodies, truncated signatures
// and timestamps outside the window are rejected with 401.
func TestReplayedDeliveries(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	platform := fakePlatform(t)
	c := newChild(t, fmt.Sprintf(replayConfig, platform.URL),
		"SLACK_BOT_TOKEN=xoxb-test", "SLACK_SIGNING_SECRET="+slackSecret,
		"DISCORD_BOT_TOKEN=discord-test", "DISCORD_PUBLIC_KEY="+hex.EncodeToString(pub))
	agent := c.key("agent", "agent")
	c.start()
	newRequest := func() (string, uint64) {
		a := c.mustCall(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "api"}})
		return a.Data["request_id"].(string), uint64(a.Data["item_id"].(float64))
	}
	type replay struct {
		name    string
		id      string
		times   int
		request func(i int) *http.Request
	}
	var replays []replay
	for _, times := range []int{2, 5, 10} {
		for _, platform := range []string{"slack", "discord"} {
			id, item := newRequest()
			r := replay{name: fmt.Sprintf("%s×%d", platform, times), id: id, times: times}
			now := time.Now().Unix()
			if platform == "slack" {
				body := slackClick(item, "trigger-"+id)
				r.request = func(int) *http.Request { return slackRequest(t, c.URL+"/slack/interactions", body, now, nil) }
			} else {
				body := discordClick(item, "10000000000000"+strconv.FormatUint(item, 10))
				r.request = func(int) *http.Request { return discordRequest(t, c.URL+"/discord/interactions", priv, body, now, nil) }
			}
			replays = append(replays, r)
		}
	}
	for _, r := range replays {
		// Half of each replay concurrently, the rest after.
		var wg sync.WaitGroup
		for i := 0; i < r.times; i++ {
			if i == r.times/2 {
				wg.Wait()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := c.client.Do(r.request(i))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("%s delivery %d: status %d, want 200", r.name, i, resp.StatusCode)
				}
			}()
		}
		wg.Wait()
	}
	// Slack clicks are applied after the acknowledgement: wait for them.
	deadline := time.Now().Add(20 * time.Second)
	for _, r := range replays {
		for {
			a := c.mustCall(agent, "action_status", map[string]any{"request_id": r.id})
			if a.Data["status"] == "approved" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the click was never applied (%s)\n%s", r.name, a.Raw, c.logs())
			}
			time.Sleep(10 * time.Millisecond) // polling for an async event, not asserting speed
		}
	}

	// Tampering and the time window.
	id, item := newRequest()
	flip := func(sig string, body []byte) (string, []byte) {
		b := bytes.Clone(body)
		b[len(b)/2] ^= 0x01
		return sig, b
	}
	truncate := func(sig string, body []byte) (string, []byte) { return sig[:len(sig)-2], body }
	lastByte := func(sig string, body []byte) (string, []byte) {
		s := []byte(sig)
		if s[len(s)-1] == '0' {
			s[len(s)-1] = '1'
		} else {
			s[len(s)-1] = '0'
		}
		return string(s), body
	}
	sb := slackClick(item, "tamper-"+id)
	db := discordClick(item, "2000000000000"+strconv.FormatUint(item, 10))
	// Each request is made when it is sent, and the stale ones are 10 s
	// past the 300 s window: the wall clock moves while the requests before
	// it travel (under -race, on a loaded machine, seconds), and a margin
	// of one second once let "301 s ahead" arrive 300 s ahead.
	cases := []struct {
		name string
		req  func(now int64) *http.Request
		want int
	}{
		{"slack flipped body byte", func(now int64) *http.Request { return slackRequest(t, c.URL+"/slack/interactions", sb, now, flip) }, 401},
		{"slack truncated signature", func(now int64) *http.Request { return slackRequest(t, c.URL+"/slack/interactions", sb, now, truncate) }, 401},
		{"slack last signature byte", func(now int64) *http.Request { return slackRequest(t, c.URL+"/slack/interactions", sb, now, lastByte) }, 401},
		{"slack 310 s old", func(now int64) *http.Request { return slackRequest(t, c.URL+"/slack/interactions", sb, now-310, nil) }, 401},
		{"slack 310 s ahead", func(now int64) *http.Request { return slackRequest(t, c.URL+"/slack/interactions", sb, now+310, nil) }, 401},
		{"discord flipped body byte", func(now int64) *http.Request {
			return discordRequest(t, c.URL+"/discord/interactions", priv, db, now, flip)
		}, 401},
		{"discord truncated signature", func(now int64) *http.Request {
			return discordRequest(t, c.URL+"/discord/interactions", priv, db, now, truncate)
		}, 401},
		{"discord last signature byte", func(now int64) *http.Request {
			return discordRequest(t, c.URL+"/discord/interactions", priv, db, now, lastByte)
		}, 401},
		{"discord 310 s old", func(now int64) *http.Request {
			return discordRequest(t, c.URL+"/discord/interactions", priv, db, now-310, nil)
		}, 401},
		{"discord 310 s ahead", func(now int64) *http.Request {
			return discordRequest(t, c.URL+"/discord/interactions", priv, db, now+310, nil)
		}, 401},
	}
	for _, tc := range cases {
		if got, body := send(t, c, tc.req(time.Now().Unix())); got != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, got, body, tc.want)
		}
	}
	// Inside the window (ten seconds of margin: both adapters compare
	// against the wall clock, which moves while the request travels).
	ping := []byte(`{"type":1,"id":"1","application_id":"998877665544332211","token":"t","version":1}`)
	noop := []byte(url.Values{"payload": {`{"type":"block_actions","user":{"id":"U0123ABC","team_id":"T1"},"actions":[]}`}}.Encode())
	for _, off := range []int64{-290, 290} {
		if got, body := send(t, c, slackRequest(t, c.URL+"/slack/interactions", noop, time.Now().Unix()+off, nil)); got != 200 {
			t.Errorf("slack at %+d s: %d %s, want 200", off, got, body)
		}
		if got, body := send(t, c, discordRequest(t, c.URL+"/discord/interactions", priv, ping, time.Now().Unix()+off, nil)); got != 200 {
			t.Errorf("discord at %+d s: %d %s, want 200", off, got, body)
		}
	}
	if a := c.mustCall(agent, "action_status", map[string]any{"request_id": id}); a.Data["status"] != "pending" {
		t.Errorf("a rejected delivery changed %s: %s, want status pending", id, a.Raw)
	}
	if err := c.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	// One decision and one audit entry per request, however often its click came.
	c.checkStore(func(db *bolt.DB) {
		count := map[string]int{}
		_ = db.View(context.Background(), func(tx kv.Tx) error {
			return tx.Ascend("audit", nil, nil, func(k, v []byte) error {
				e, err := approvals.DecodeRow(k, v)
				if err != nil {
					return err
				}
				if e.Action == "action_approved" {
					id, _, _ := strings.Cut(e.Detail, " ")
					count[id]++
				}
				return nil
			})
		})
		for _, r := range replays {
			if count[r.id] != 1 {
				t.Errorf("%s: %d approvals audited for %s, want exactly 1", r.name, count[r.id], r.id)
			}
		}
	})
}

// TestCallbackSignatureWindow checks the signed callbacks Countersign sends
// (Standard Webhooks): the receiver's Verify accepts ±300 s and rejects
// ±301 s, a flipped body byte, a changed last signature byte and a
// truncated signature; repeated deliveries verify identically (the
// receiver deduplicates by webhook-id).
func TestCallbackSignatureWindow(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"request_id":"req_1","status":"approved"}`)
	now := time.Unix(1_800_000_000, 0)
	header := func(ts int64, sig string) http.Header {
		h := http.Header{}
		h.Set(actiontools.HeaderID, "msg_1")
		h.Set(actiontools.HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(actiontools.HeaderSignature, sig)
		return h
	}
	good := actiontools.Sign(secret, "msg_1", now.Unix(), body)
	for _, off := range []int64{-300, 0, 300} {
		ts := now.Unix() + off
		if err := actiontools.Verify(secret, header(ts, actiontools.Sign(secret, "msg_1", ts, body)), body, now, 0); err != nil {
			t.Errorf("offset %+d s: %v, want accepted", off, err)
		}
	}
	for _, off := range []int64{-301, 301} {
		ts := now.Unix() + off
		if err := actiontools.Verify(secret, header(ts, actiontools.Sign(secret, "msg_1", ts, body)), body, now, 0); err == nil {
			t.Errorf("offset %+d s accepted, want rejected", off)
		}
	}
	flipped := bytes.Clone(body)
	flipped[5] ^= 1
	last := []byte(good)
	last[len(last)-2] ^= 1 // inside the base64, before any padding
	for name, tc := range map[string]struct {
		sig  string
		body []byte
	}{
		"flipped body byte":   {good, flipped},
		"last signature byte": {string(last), body},
		"truncated signature": {good[:len(good)-4], body},
		"no signature":        {"", body},
	} {
		if err := actiontools.Verify(secret, header(now.Unix(), tc.sig), tc.body, now, 0); err == nil {
			t.Errorf("%s: accepted, want the signature refused", name)
		}
	}
	for i := 0; i < 5; i++ {
		if err := actiontools.Verify(secret, header(now.Unix(), good), body, now, 0); err != nil {
			t.Fatalf("delivery %d of the same callback: %v", i, err)
		}
	}
}
