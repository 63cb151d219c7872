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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/slack"
	"github.com/countersign/countersign/adapters/slack/slacktest"
	"github.com/countersign/countersign/bot"
)

const (
	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackOps    = "C0OPS"
)

// slackSurface is the Slack adapter in HTTP mode with one click worker
// (clicks are decided in the order they were acknowledged), its handlers
// on a loopback port and slacktest behind it.
type slackSurface struct {
	t    *testing.T
	w    *world
	fake *slacktest.Server
	ad   *slack.Adapter
	url  string
	stop func() // stops the click worker and the handlers
	seq  atomic.Int64
	mu   sync.Mutex
	// clicked is, by Slack user id, how many private answers had been
	// sent when that user last clicked: an answer after it may be theirs.
	clicked     map[string]int
	last        *http.Request // the last click, to replay
	body        string
	lastWho     person // who sent the last click, in which channel
	lastChannel string
	lastTrigger string
}

func newSlack(t *testing.T) surface {
	t.Helper()
	s := &slackSurface{t: t, w: newWorld(t, slack.Sink), fake: slacktest.New(t), clicked: map[string]int{}}
	s.start()
	return s
}

// start builds the adapter on the world's bot, serves its handlers on a
// new loopback port and runs its click worker until stop.
func (s *slackSurface) start() {
	t := s.t
	t.Helper()
	ad, err := slack.New(slack.Options{
		Bot: s.w.bot, Mode: slack.ModeHTTP, BotToken: "xoxb-test", SigningSecret: slackSecret,
		APIURL: s.fake.URL(), Channels: map[string]string{"default": "C0DEFAULT", "ops": slackOps},
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
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			srv.Close()
			cancel()
			<-done
		})
	}
	t.Cleanup(s.stop)
	s.ad, s.url = ad, srv.URL+"/slack/interactions"
}

func (s *slackSurface) restart() {
	s.t.Helper()
	s.stop()
	s.w.close()
	s.w.open()
	s.start()
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
		s.t.Fatalf("no chat.postMessage answered with ts %s, want item %d's card posted", r.MessageID, id)
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
	return s.sendWith(p, id, button, value, blocks, nil)
}

// sendWith is send with the payload's state (a form's inputs on the
// message: a multi-choice question's checkboxes).
func (s *slackSurface) sendWith(p person, id uint64, button, value string, blocks, state any) answer {
	s.t.Helper()
	r := ref(s.t, s.w, slack.Sink, id)
	before := len(s.fake.Calls("chat.postEphemeral"))
	s.mu.Lock()
	s.clicked[people.slack[p]] = before
	s.mu.Unlock()
	trigger := s.trigger()
	payload := map[string]any{
		"type": "block_actions", "trigger_id": trigger,
		"user": map[string]any{"id": people.slack[p], "team_id": slackTeam}, "team": map[string]any{"id": slackTeam},
		"container": map[string]any{"type": "message", "channel_id": r.ChannelID, "message_ts": r.MessageID},
		"channel":   map[string]any{"id": r.ChannelID},
		"message":   map[string]any{"ts": r.MessageID, "blocks": blocks},
		"actions": []any{map[string]any{"type": "button", "action_id": "countersign." + button,
			"block_id": "countersign:" + strconv.FormatUint(id, 10), "value": value, "action_ts": "1767225601.000001"}},
	}
	if state != nil {
		payload["state"] = state
	}
	req := s.signed(payload, slackSecret, time.Now())
	s.mu.Lock()
	s.last, s.body, s.lastWho, s.lastChannel, s.lastTrigger = req, req.Header.Get("X-Body"), p, r.ChannelID, trigger
	s.mu.Unlock()
	if code, body := s.do(req); code != http.StatusOK || body != "" {
		s.t.Fatalf("click answered %d %q, want an empty 200", code, body)
	}
	return s.settle(p, r.ChannelID, before)
}

func (s *slackSurface) replay() answer {
	s.t.Helper()
	before := len(s.fake.Calls("chat.postEphemeral"))
	s.mu.Lock()
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(s.body))
	req.Header = s.last.Header.Clone()
	who, channel := s.lastWho, s.lastChannel
	s.mu.Unlock()
	if code, body := s.do(req); code != http.StatusOK || body != "" {
		s.t.Fatalf("replayed click answered %d %q, want an empty 200", code, body)
	}
	return s.settle(who, channel, before)
}

// settle queues a probe (approver's click on an item that does not
// exist, its own number from 900000 up), waits for its answer, and
// returns the private answers to p since the before-th, the probes' left
// out. A private answer to anyone but p (and the others clicking at the
// same time), or in another channel than the item's, fails the test.
func (s *slackSurface) settle(p person, channel string, before int) answer {
	s.t.Helper()
	probe := strconv.FormatInt(900000+s.seq.Add(1), 10)
	payload := map[string]any{
		"type": "block_actions", "trigger_id": s.trigger(),
		"user": map[string]any{"id": people.slack[approver], "team_id": slackTeam}, "team": map[string]any{"id": slackTeam},
		"container": map[string]any{"type": "message", "channel_id": slackOps, "message_ts": "1.1"},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + probe, "value": probe, "action_ts": "1.1"}},
	}
	if code, _ := s.do(s.signed(payload, slackSecret, time.Now())); code != http.StatusOK {
		s.t.Fatalf("probe answered %d, want 200", code)
	}
	wait(s.t, "the click worker to answer probe #"+probe, func() bool {
		for _, c := range s.ephemerals(approver) {
			if strings.Contains(c.Form.Get("text"), "#"+probe) {
				return true
			}
		}
		return false
	})
	var a answer
	for i, c := range s.fake.Calls("chat.postEphemeral")[before:] {
		text := c.Form.Get("text")
		if probeAnswer.MatchString(text) {
			continue
		}
		u, ch := c.Form.Get("user"), c.Form.Get("channel")
		s.mu.Lock()
		at, ok := s.clicked[u]
		s.mu.Unlock()
		if u != people.slack[p] && ok && at <= before+i {
			continue // the answer to another's click (concurrent clicks)
		}
		if u != people.slack[p] || ch != channel {
			s.t.Errorf("a private answer went to %s in %s, want only the clicker %s in the item's channel %s: %q", u, ch, people.slack[p], channel, text)
			continue
		}
		a.private = strings.TrimSpace(a.private + "\n" + text)
		a.n++
	}
	return a
}

// probeAnswer matches the answer to a probe.
var probeAnswer = regexp.MustCompile(`#9\d{5}\b`)

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

// do sends req and returns the status and body of the answer.
func (s *slackSurface) do(req *http.Request) (int, string) {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *slackSurface) status(req *http.Request) int {
	code, _ := s.do(req)
	return code
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
		"signed with another secret": s.status(s.signed(payload, "wrong-secret", time.Now())),
		"6 minutes old":              s.status(s.signed(payload, slackSecret, time.Now().Add(-6*time.Minute))),
		"6 minutes ahead":            s.status(s.signed(payload, slackSecret, time.Now().Add(6*time.Minute))),
	}
	unsigned := s.signed(payload, slackSecret, time.Now())
	unsigned.Header.Del("X-Slack-Signature")
	unsigned.Header.Del("X-Slack-Request-Timestamp")
	out["unsigned"] = s.status(unsigned)
	good := s.signed(payload, slackSecret, time.Now())
	tampered, _ := http.NewRequest("POST", s.url, strings.NewReader(good.Header.Get("X-Body")+"x"))
	tampered.Header = good.Header.Clone()
	out["body changed after signing"] = s.status(tampered)
	return out
}

func (s *slackSurface) doubled(id uint64) (int, string, string) {
	s.t.Helper()
	v, blocks := s.value(id, "approve")
	r := ref(s.t, s.w, slack.Sink, id)
	b, err := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": s.trigger(),
		"user": map[string]any{"id": people.slack[approver], "team_id": slackTeam}, "team": map[string]any{"id": slackTeam},
		"container": map[string]any{"type": "message", "channel_id": r.ChannelID, "message_ts": r.MessageID},
		"message":   map[string]any{"ts": r.MessageID, "blocks": blocks},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + strconv.FormatUint(id, 10), "value": v, "action_ts": "1.1"}},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	payload := strings.Replace(string(b), `"value":"`+v+`"`, `"value":"0","value":"`+v+`"`, 1)
	if payload == string(b) {
		s.t.Fatalf("click payload %s, want a value to give twice", b)
	}
	body := url.Values{"payload": {payload}}.Encode()
	now := time.Now()
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("X-Slack-Signature", slackSign(slackSecret, now.Unix(), body))
	code, answer := s.do(req)
	return code, answer, "payload.actions[0].value"
}

func (s *slackSurface) reject(p person, id uint64, reason string) answer {
	s.t.Helper()
	opens := len(s.fake.Calls("views.open"))
	if a := s.click(p, id, "reject"); a.private != "" {
		return a // refused before the form
	}
	views := s.fake.Calls("views.open")
	if len(views) != opens+1 {
		s.t.Fatalf("%d views.open after Reject, want the reason form opened once", len(views)-opens)
	}
	open := views[len(views)-1]
	view, _ := open.JSON["view"].(map[string]any)
	r := ref(s.t, s.w, slack.Sink, id)
	if open.JSON["trigger_id"] != s.lastTrigger || view["callback_id"] != "countersign.reject" ||
		view["private_metadata"] != fmt.Sprintf("%d|%s", id, r.ChannelID) || open.Auth != "Bearer xoxb-test" {
		s.t.Fatalf("views.open %v (auth %q), want the click's trigger %s, callback countersign.reject, metadata %d|%s and the bot token",
			open.JSON, open.Auth, s.lastTrigger, id, r.ChannelID)
	}
	before := len(s.fake.Calls("chat.postEphemeral"))
	submit := map[string]any{
		"type": "view_submission", "trigger_id": s.trigger(),
		"user": map[string]any{"id": people.slack[p], "team_id": slackTeam}, "team": map[string]any{"id": slackTeam},
		"view": map[string]any{
			"id": "V" + s.trigger(), "callback_id": view["callback_id"], "private_metadata": view["private_metadata"],
			"state": map[string]any{"values": map[string]any{"reason_block": map[string]any{"reason": map[string]any{"type": "plain_text_input", "value": reason}}}},
		},
	}
	code, body := s.do(s.signed(submit, slackSecret, time.Now()))
	if code != http.StatusOK {
		s.t.Fatalf("reason submitted: %d %q, want 200", code, body)
	}
	if body != "" { // the form stays open with the problem
		var resp struct {
			Action string            `json:"response_action"`
			Errors map[string]string `json:"errors"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Action != "errors" {
			s.t.Fatalf("reason submitted: %q (%v), want empty or response_action errors", body, err)
		}
		return answer{private: resp.Errors["reason_block"], n: 1}
	}
	return s.settle(p, r.ChannelID, before)
}

func (s *slackSurface) replies(id uint64) []string {
	r := ref(s.t, s.w, slack.Sink, id)
	var out []string
	for _, c := range s.fake.Calls("chat.postMessage") {
		if c.Form.Get("channel") == r.ChannelID && c.Form.Get("thread_ts") == r.MessageID {
			out = append(out, c.Form.Get("text"))
		}
	}
	return out
}

func (s *slackSurface) renderer() bot.Renderer { return s.ad.Renderer() }

func (s *slackSurface) throttle(after time.Duration) {
	s.fake.RateLimit("chat.postMessage", int(after/time.Second))
}

func (s *slackSurface) refuse(permanent bool) {
	if permanent {
		s.fake.SlackError("chat.postMessage", "channel_not_found")
		return
	}
	s.fake.Fail("chat.postMessage", func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
}

func (s *slackSurface) answer(p person, id uint64, choices ...int) answer {
	s.t.Helper()
	_, blocks := s.value(id, "approve")
	sid := strconv.FormatUint(id, 10)
	if !s.card(p, id).has("submit") { // one option's button
		return s.send(p, id, "answer."+strconv.Itoa(choices[0]), sid+":"+strconv.Itoa(choices[0]), blocks)
	}
	var selected []any
	for _, c := range choices {
		selected = append(selected, map[string]any{"value": strconv.Itoa(c)})
	}
	return s.sendWith(p, id, "submit", sid, blocks, map[string]any{"values": map[string]any{"countersign:" + sid: map[string]any{
		"countersign.choices": map[string]any{"type": "checkboxes", "selected_options": selected}}}})
}

func (s *slackSurface) details(p person, id uint64) answer {
	s.t.Helper()
	r := ref(s.t, s.w, slack.Sink, id)
	var a answer
	for _, c := range s.ephemerals(p) {
		if c.Form.Get("channel") != r.ChannelID || c.Form.Get("blocks") == "" {
			continue
		}
		blocks := decode(s.t, c.Form.Get("blocks"))
		text := strings.Join(texts(blocks), "\n")
		if strings.Contains(text, fmt.Sprintf("#%d", id)) {
			for _, b := range blocks.([]any) {
				if b.(map[string]any)["type"] == "actions" {
					s.t.Errorf("the private detail of #%d has buttons (%v), want none: decide on the card in the channel", id, b)
				}
			}
			a.private = strings.TrimSpace(a.private + "\n" + text)
			a.n++
		}
	}
	return a
}

func (s *slackSurface) channel(name string) string {
	return map[string]string{"default": "C0DEFAULT", "ops": slackOps}[name]
}

func (s *slackSurface) posts() int {
	n := 0
	for _, c := range s.fake.Calls("chat.postMessage") {
		if c.Form.Get("thread_ts") != "" {
			continue
		}
		if c.Form.Get("token") != "xoxb-test" {
			s.t.Errorf("a card posted with token %q, want the bot token xoxb-test", c.Form.Get("token"))
		}
		n++
	}
	return n
}
