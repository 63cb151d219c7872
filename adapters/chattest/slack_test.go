package chattest

import (
	"context"
	"crypto/hmac"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/slack"
	"github.com/countersign/countersign/adapters/slack/slacktest"
)

const (
	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackOps    = "C0OPS"
	// slackProbe is the item a probe click names: there is none.
	slackProbe = "999999"
)

// slackSurface is the Slack adapter in HTTP mode with one click worker
// (clicks are decided in the order they were acknowledged), its handlers
// on a loopback port and slacktest behind it.
type slackSurface struct {
	t       *testing.T
	w       *world
	fake    *slacktest.Server
	ad      *slack.Adapter
	url     string
	last    *http.Request // the last click, to replay
	body    string
	lastWho person // who sent the last click
	seq     atomic.Int64
}

func newSlack(t *testing.T) surface {
	t.Helper()
	w := newWorld(t, slack.Sink)
	fake := slacktest.New(t)
	ad, err := slack.New(slack.Options{
		Bot: w.bot, Mode: slack.ModeHTTP, BotToken: "xoxb-test", SigningSecret: slackSecret,
		APIURL: fake.URL(), Channels: map[string]string{"default": "C0DEFAULT", "ops": slackOps},
		Approvers:   []string{slackTeam + "/" + people.slack[approver], slackTeam + "/" + people.slack[second]},
		RoleMembers: map[string][]string{"member": {people.slack[approver], people.slack[second]}},
		HTTPClient:  slacktest.Client(), Dialer: slacktest.Dialer(), Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /slack/interactions", ad.InteractionsHandler())
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ad.RunClicks(ctx) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	return &slackSurface{t: t, w: w, fake: fake, ad: ad, url: srv.URL + "/slack/interactions"}
}

func (s *slackSurface) world() *world { return s.w }
func (s *slackSurface) name() string  { return slack.Sink }

func (s *slackSurface) who(p person) string {
	if p == stranger {
		return "unmapped [" + slackTeam + "/" + people.slack[p] + "]"
	}
	return names[p] + " [" + people.slack[p] + "]"
}

func (s *slackSurface) drain() {
	s.t.Helper()
	o := s.w.bot.Outbox()
	if err := o.Drain(context.Background(), slack.Sink, o.DeliverTo(slack.Sink, s.ad.Renderer())); err != nil {
		s.t.Fatal(err)
	}
}

// message is the last chat.postMessage or chat.update of item id's
// message.
func (s *slackSurface) message(id uint64) slacktest.Call {
	s.t.Helper()
	r := ref(s.t, s.w, slack.Sink, id)
	var last *slacktest.Call
	for _, c := range s.fake.Calls("") {
		if (c.Method == "chat.postMessage" && c.TS == r.MessageID) || (c.Method == "chat.update" && c.Form.Get("ts") == r.MessageID) {
			last = &c
		}
	}
	if last == nil {
		s.t.Fatalf("no post of item %d's message %s", id, r.MessageID)
	}
	return *last
}

func (s *slackSurface) card(_ person, id uint64) card {
	s.t.Helper()
	m := s.message(id)
	var c card
	blocks := decode(s.t, m.Form.Get("blocks"))
	c.text = strings.Join(append(texts(blocks), m.Form.Get("text")), "\n")
	for _, b := range blocks.([]any) {
		els, _ := b.(map[string]any)["elements"].([]any)
		for _, el := range els {
			el, _ := el.(map[string]any)
			a, ok := strings.CutPrefix(fmt.Sprint(el["action_id"]), "countersign.")
			if !ok {
				continue
			}
			c.buttons = append(c.buttons, a)
			if confirm, _ := el["confirm"].(map[string]any); a == "approve" && el["style"] == "danger" && confirm != nil {
				c.danger = strings.Join(texts(confirm), "\n")
			}
		}
	}
	return c
}

func (s *slackSurface) edits(id uint64) int {
	r := ref(s.t, s.w, slack.Sink, id)
	n := 0
	for _, c := range s.fake.Calls("chat.update") {
		if c.Form.Get("channel") == r.ChannelID && c.Form.Get("ts") == r.MessageID {
			n++
		}
	}
	return n
}

// value is the value of item id's button on its card as posted.
func (s *slackSurface) value(id uint64, button string) (string, any) {
	s.t.Helper()
	m := s.message(id)
	blocks := decode(s.t, m.Form.Get("blocks"))
	for _, b := range blocks.([]any) {
		els, _ := b.(map[string]any)["elements"].([]any)
		for _, el := range els {
			if el, _ := el.(map[string]any); el["action_id"] == "countersign."+button {
				return fmt.Sprint(el["value"]), blocks
			}
		}
	}
	return strconv.FormatUint(id, 10), blocks // a decided card has none: what an old card sent
}

func (s *slackSurface) click(p person, id uint64, button string) answer {
	s.t.Helper()
	v, blocks := s.value(id, button)
	return s.send(p, id, button, v, blocks)
}

func (s *slackSurface) unconfirmed(p person, id uint64) answer {
	s.t.Helper()
	_, blocks := s.value(id, "approve")
	return s.send(p, id, "approve", strconv.FormatUint(id, 10), blocks)
}

// send posts a block_actions payload, signed now, and waits until the
// click worker has decided it (a probe click queued after it has been
// answered); it returns the private answers p got meanwhile.
func (s *slackSurface) send(p person, id uint64, button, value string, blocks any) answer {
	s.t.Helper()
	r := ref(s.t, s.w, slack.Sink, id)
	before := len(s.ephemerals(p))
	payload := map[string]any{
		"type": "block_actions", "trigger_id": s.trigger(),
		"user": map[string]any{"id": people.slack[p], "team_id": slackTeam}, "team": map[string]any{"id": slackTeam},
		"container": map[string]any{"type": "message", "channel_id": r.ChannelID, "message_ts": r.MessageID},
		"channel":   map[string]any{"id": r.ChannelID},
		"message":   map[string]any{"ts": r.MessageID, "blocks": blocks},
		"actions": []any{map[string]any{"type": "button", "action_id": "countersign." + button,
			"block_id": "countersign:" + strconv.FormatUint(id, 10), "value": value, "action_ts": "1767225601.000001"}},
	}
	req := s.signed(payload, slackSecret, time.Now())
	s.last, s.body, s.lastWho = req, req.Header.Get("X-Body"), p
	if code := s.do(req); code != http.StatusOK {
		s.t.Fatalf("click answered %d, want 200", code)
	}
	return s.settle(p, before)
}

func (s *slackSurface) replay() answer {
	s.t.Helper()
	before := len(s.ephemerals(s.lastWho))
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(s.body))
	req.Header = s.last.Header.Clone()
	if code := s.do(req); code != http.StatusOK {
		s.t.Fatalf("replayed click answered %d, want 200", code)
	}
	return s.settle(s.lastWho, before)
}

// settle queues a probe (approver's click on an item that does not
// exist), waits for its answer, and returns the private answers to p
// since before, the probe's left out.
func (s *slackSurface) settle(p person, before int) answer {
	s.t.Helper()
	probe := map[string]any{
		"type": "block_actions", "trigger_id": s.trigger(),
		"user": map[string]any{"id": people.slack[approver], "team_id": slackTeam}, "team": map[string]any{"id": slackTeam},
		"container": map[string]any{"type": "message", "channel_id": slackOps, "message_ts": "1.1"},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + slackProbe, "value": slackProbe, "action_ts": "1.1"}},
	}
	probes := len(s.probes())
	if code := s.do(s.signed(probe, slackSecret, time.Now())); code != http.StatusOK {
		s.t.Fatalf("probe answered %d", code)
	}
	wait(s.t, "the click worker to answer the probe", func() bool { return len(s.probes()) > probes })
	var a answer
	for _, c := range s.ephemerals(p)[before:] {
		if !strings.Contains(c.Form.Get("text"), "#"+slackProbe) {
			a.private = strings.TrimSpace(a.private + "\n" + c.Form.Get("text"))
		}
	}
	return a
}

func (s *slackSurface) probes() []slacktest.Call {
	var out []slacktest.Call
	for _, c := range s.ephemerals(approver) {
		if strings.Contains(c.Form.Get("text"), "#"+slackProbe) {
			out = append(out, c)
		}
	}
	return out
}

func (s *slackSurface) ephemerals(p person) []slacktest.Call {
	var out []slacktest.Call
	for _, c := range s.fake.Calls("chat.postEphemeral") {
		if c.Form.Get("user") == people.slack[p] {
			out = append(out, c)
		}
	}
	return out
}

func (s *slackSurface) trigger() string { return fmt.Sprintf("trig-%d", s.seq.Add(1)) }

// signed is a request posting payload signed with secret at ts; its body
// is kept in the X-Body header for a replay (the adapter ignores it).
func (s *slackSurface) signed(payload any, secret string, ts time.Time) *http.Request {
	s.t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		s.t.Fatal(err)
	}
	body := url.Values{"payload": {string(b)}}.Encode()
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("X-Slack-Signature", slackSign(secret, ts.Unix(), body))
	req.Header.Set("X-Body", body)
	return req
}

func slackSign(secret string, ts int64, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:%s", ts, body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

func (s *slackSurface) do(req *http.Request) int {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (s *slackSurface) forged(id uint64) map[string]int {
	s.t.Helper()
	v, blocks := s.value(id, "approve")
	r := ref(s.t, s.w, slack.Sink, id)
	payload := map[string]any{
		"type": "block_actions", "trigger_id": s.trigger(),
		"user": map[string]any{"id": people.slack[approver], "team_id": slackTeam}, "team": map[string]any{"id": slackTeam},
		"container": map[string]any{"type": "message", "channel_id": r.ChannelID, "message_ts": r.MessageID},
		"message":   map[string]any{"ts": r.MessageID, "blocks": blocks},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + strconv.FormatUint(id, 10), "value": v, "action_ts": "1.1"}},
	}
	out := map[string]int{
		"signed with another secret": s.do(s.signed(payload, "wrong-secret", time.Now())),
		"6 minutes old":              s.do(s.signed(payload, slackSecret, time.Now().Add(-6*time.Minute))),
		"6 minutes ahead":            s.do(s.signed(payload, slackSecret, time.Now().Add(6*time.Minute))),
	}
	unsigned := s.signed(payload, slackSecret, time.Now())
	unsigned.Header.Del("X-Slack-Signature")
	unsigned.Header.Del("X-Slack-Request-Timestamp")
	out["unsigned"] = s.do(unsigned)
	good := s.signed(payload, slackSecret, time.Now())
	tampered, _ := http.NewRequest("POST", s.url, strings.NewReader(good.Header.Get("X-Body")+"x"))
	tampered.Header = good.Header.Clone()
	out["body changed after signing"] = s.do(tampered)
	return out
}
