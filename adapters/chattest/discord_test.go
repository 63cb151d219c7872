package chattest

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/discord"
	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/countersign/countersign/bot"
)

const (
	discordToken = "bot-token"
	discordGuild = "G1"
)

// discordSurface is the Discord adapter's HTTP endpoint on a loopback
// port, discordtest behind it. Interactions are answered in the request:
// a click's answer is its response.
type discordSurface struct {
	t    *testing.T
	w    *world
	fake *discordtest.Server
	ad   *discord.Adapter
	url  string
	stop func()
	pub  ed25519.PublicKey
	key  ed25519.PrivateKey
	mu   sync.Mutex
	seq  int
	last []byte // the last interaction's body, to replay
}

func newDiscord(t *testing.T) surface {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &discordSurface{t: t, w: newWorld(t, discord.Sink), fake: discordtest.New(t, discordToken), pub: pub, key: priv}
	s.start()
	return s
}

// start builds the adapter on the world's bot and serves its endpoint on
// a new loopback port until stop.
func (s *discordSurface) start() {
	t := s.t
	t.Helper()
	ad, err := discord.New(discord.Options{
		Bot: s.w.bot, Token: discordToken, PublicKey: s.pub, ApplicationID: "APP", GuildID: discordGuild,
		APIURL: s.fake.APIURL, Channels: map[string]string{"default": "C100", "ops": "C200"},
		Transport: discordtest.Transport(), Dialer: discordtest.Dialer(),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /discord/interactions", ad.Handler())
	srv := httptest.NewServer(mux)
	s.stop = srv.Close
	t.Cleanup(srv.Close)
	s.ad, s.url = ad, srv.URL+"/discord/interactions"
}

func (s *discordSurface) restart() {
	s.t.Helper()
	s.stop()
	s.w.close()
	s.w.open()
	s.start()
}

func (s *discordSurface) world() *world { return s.w }
func (s *discordSurface) name() string  { return discord.Sink }

func (s *discordSurface) who(p person) string {
	if p == stranger {
		return "unmapped [" + people.discord[p] + "]"
	}
	return names[p] + " [" + people.discord[p] + "]"
}

func (s *discordSurface) drain() {
	s.t.Helper()
	o := s.w.bot.Outbox()
	if err := o.Drain(context.Background(), discord.Sink, o.DeliverTo(discord.Sink, s.ad.Renderer())); err != nil {
		s.t.Fatal(err)
	}
	for _, c := range s.fake.Calls() {
		if c.Method == "POST" || c.Method == "PATCH" {
			wantNoMentions(s.t, c.JSON())
		}
	}
}

// cardOf normalises a Discord message (posted, edited or answered): its
// buttons by the action of their custom id (cs:ACTION:ITEM…).
func (s *discordSurface) cardOf(m map[string]any) card {
	s.t.Helper()
	c := card{text: unmarked(strings.Join(texts(m), "\n"))}
	rows, _ := m["components"].([]any)
	for _, r := range rows {
		cs, _ := r.(map[string]any)["components"].([]any)
		for _, b := range cs {
			b, _ := b.(map[string]any)
			parts := strings.Split(fmt.Sprint(b["custom_id"]), ":")
			if len(parts) < 3 || parts[0] != "cs" {
				continue
			}
			c.buttons = append(c.buttons, parts[1])
			if parts[1] == "approve" && fmt.Sprint(b["style"]) == "4" {
				c.danger = "the red Approve opens a confirmation step"
			}
		}
	}
	return c
}

// wantNoMentions fails unless m carries allowed_mentions with an empty
// parse list: Discord never pings anyone from a card or an answer.
func wantNoMentions(t *testing.T, m map[string]any) {
	t.Helper()
	am, ok := m["allowed_mentions"].(map[string]any)
	p, _ := am["parse"].([]any)
	if !ok || p == nil || len(p) != 0 {
		t.Errorf("allowed_mentions = %v, want {parse: []}", m["allowed_mentions"])
	}
}

func (s *discordSurface) card(_ person, id uint64) card {
	s.t.Helper()
	m := s.fake.Message(ref(s.t, s.w, discord.Sink, id).MessageID)
	if m == nil {
		s.t.Fatalf("the fake holds no message of item %d, want its posted card", id)
	}
	return s.cardOf(m)
}

func (s *discordSurface) edits(id uint64) int {
	r := ref(s.t, s.w, discord.Sink, id)
	return len(s.fake.CallsTo("PATCH", "channels/"+r.ChannelID+"/messages/"+r.MessageID))
}

// customID is the custom id of item id's button on its message, or the
// plain cs:ACTION:ITEM an old card carried when it has none.
func (s *discordSurface) customID(id uint64, button string) string {
	m := s.fake.Message(ref(s.t, s.w, discord.Sink, id).MessageID)
	rows, _ := m["components"].([]any)
	for _, r := range rows {
		cs, _ := r.(map[string]any)["components"].([]any)
		for _, b := range cs {
			if c := fmt.Sprint(b.(map[string]any)["custom_id"]); strings.HasPrefix(c, "cs:"+button+":") {
				return c
			}
		}
	}
	return "cs:" + button + ":" + strconv.FormatUint(id, 10)
}

func (s *discordSurface) clicker(p person) discordtest.Clicker {
	return discordtest.Clicker{UserID: people.discord[p], GuildID: discordGuild}
}

func (s *discordSurface) click(p person, id uint64, button string) answer {
	s.t.Helper()
	a := s.send(p, id, s.customID(id, button))
	if a.step { // a destructive Approve: press the step's confirm button
		return s.send(p, id, a.confirm)
	}
	return a
}

func (s *discordSurface) unconfirmed(p person, id uint64) answer {
	s.t.Helper()
	return s.send(p, id, s.customID(id, "approve"))
}

func (s *discordSurface) send(p person, id uint64, custom string) answer {
	s.t.Helper()
	r := ref(s.t, s.w, discord.Sink, id)
	s.mu.Lock()
	s.seq++
	body := discordtest.Marshal(s.t, discordtest.Click("i"+strconv.Itoa(s.seq), s.clicker(p), r.ChannelID, r.MessageID, custom))
	s.last = body
	s.mu.Unlock()
	return s.post(body)
}

func (s *discordSurface) replay() answer {
	s.t.Helper()
	s.mu.Lock()
	body := s.last
	s.mu.Unlock()
	return s.post(body)
}

// post signs body now and normalises the interaction response.
func (s *discordSurface) post(body []byte) answer {
	s.t.Helper()
	status, resp := discordtest.Post(s.t, s.url, s.key, s.w.clock.Now(), body)
	if status != http.StatusOK {
		s.t.Fatalf("interaction answered %d %v, want 200", status, resp)
	}
	typ, _ := resp["type"].(float64)
	d, _ := resp["data"].(map[string]any)
	if d != nil && int(typ) != 9 { // a message (not a modal): it pings nobody
		wantNoMentions(s.t, d)
	}
	switch int(typ) {
	case 4: // a reply: private (flags 64), perhaps a confirmation step
		if f, _ := d["flags"].(float64); int(f)&64 == 0 {
			s.t.Fatalf("reply flags %v, want 64 (ephemeral): %v", d["flags"], d)
		}
		c := s.cardOf(d)
		a := answer{private: unmarked(fmt.Sprint(d["content"])), n: 1}
		if c.text != "" {
			a.detail = c.text
		}
		for _, b := range c.buttons {
			if b == "confirm" {
				a.step = true
				rows, _ := d["components"].([]any)
				for _, r := range rows {
					for _, b := range r.(map[string]any)["components"].([]any) {
						if id := fmt.Sprint(b.(map[string]any)["custom_id"]); strings.HasPrefix(id, "cs:confirm:") {
							a.confirm = id
						}
					}
				}
			}
		}
		return a
	case 9: // a modal: the reason form
		return answer{form: fmt.Sprint(d["custom_id"])}
	case 7: // the clicked message updated in place
		c := s.cardOf(d)
		return answer{card: &c}
	}
	s.t.Fatalf("interaction response of type %v (%v), want 4 (a reply) or 7 (the message updated)", resp["type"], resp)
	return answer{}
}

func (s *discordSurface) forged(id uint64) map[string]int {
	s.t.Helper()
	r := ref(s.t, s.w, discord.Sink, id)
	body := discordtest.Marshal(s.t, discordtest.Click("forged", s.clicker(approver), r.ChannelID, r.MessageID, s.customID(id, "approve")))
	now := s.w.clock.Now()
	stamp := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	_, other, err := ed25519.GenerateKey(nil)
	if err != nil {
		s.t.Fatal(err)
	}
	send := func(ts, sig string, body []byte) int {
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(string(body)))
		if ts != "" {
			req.Header.Set("X-Signature-Timestamp", ts)
		}
		if sig != "" {
			req.Header.Set("X-Signature-Ed25519", sig)
		}
		resp, err := (&http.Client{Transport: discordtest.Transport()}).Do(req)
		if err != nil {
			s.t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	old, ahead := now.Add(-6*time.Minute), now.Add(6*time.Minute)
	return map[string]int{
		"signed with another key":    send(stamp(now), discordtest.Sign(other, stamp(now), body), body),
		"body changed after signing": send(stamp(now), discordtest.Sign(s.key, stamp(now), body), append([]byte(nil), append(body[:len(body)-1:len(body)-1], []byte(`,"x":1}`)...)...)),
		"6 minutes old":              send(stamp(old), discordtest.Sign(s.key, stamp(old), body), body),
		"6 minutes ahead":            send(stamp(ahead), discordtest.Sign(s.key, stamp(ahead), body), body),
		"timestamp not a number":     send("soon", discordtest.Sign(s.key, "soon", body), body),
		"unsigned":                   send(stamp(now), "", body),
		"no timestamp":               send("", discordtest.Sign(s.key, "", body), body),
		"signature not hex":          send(stamp(now), "zz", body),
	}
}

func (s *discordSurface) doubled(id uint64) (int, string, string) {
	s.t.Helper()
	r := ref(s.t, s.w, discord.Sink, id)
	body := string(discordtest.Marshal(s.t, discordtest.Click("i-dup", s.clicker(approver), r.ChannelID, r.MessageID, s.customID(id, "approve"))))
	doubled := strings.Replace(body, `"custom_id":"`, `"custom_id":"nothing","custom_id":"`, 1)
	if doubled == body {
		s.t.Fatalf("click body %s, want a custom_id to give twice", body)
	}
	status, resp := discordtest.Post(s.t, s.url, s.key, s.w.clock.Now(), []byte(doubled))
	return status, fmt.Sprint(resp["error"]), "data.custom_id"
}

func (s *discordSurface) reject(p person, id uint64, reason string) answer {
	s.t.Helper()
	a := s.send(p, id, s.customID(id, "reject"))
	if a.form == "" {
		return a // refused before the form
	}
	if want := "cs:reason:" + strconv.FormatUint(id, 10); a.form != want {
		s.t.Fatalf("the reason modal's custom_id is %q, want %q", a.form, want)
	}
	r := ref(s.t, s.w, discord.Sink, id)
	s.mu.Lock()
	s.seq++
	body := discordtest.Marshal(s.t, discordtest.Submit("i"+strconv.Itoa(s.seq), s.clicker(p), r.ChannelID, r.MessageID, a.form, reason))
	s.last = body
	s.mu.Unlock()
	return s.post(body)
}

func (s *discordSurface) replies(id uint64) []string {
	r := ref(s.t, s.w, discord.Sink, id)
	var out []string
	for _, c := range s.fake.CallsTo("POST", "channels/"+r.ChannelID+"/messages") {
		m := c.JSON()
		if mr, _ := m["message_reference"].(map[string]any); mr["message_id"] == r.MessageID && mr["channel_id"] == r.ChannelID {
			out = append(out, fmt.Sprint(m["content"]))
		}
	}
	return out
}

func (s *discordSurface) renderer() bot.Renderer { return s.ad.Renderer() }

func (s *discordSurface) throttle(after time.Duration) {
	s.fake.Fail(discordtest.Failure{Method: "POST", Prefix: "channels/", Status: http.StatusTooManyRequests,
		Body: fmt.Sprintf(`{"message":"You are being rate limited.","retry_after":%g,"global":false}`, after.Seconds())})
}

func (s *discordSurface) refuse(permanent bool) {
	status := http.StatusServiceUnavailable
	if permanent {
		status = http.StatusForbidden // Missing Access: the bot may not post there
	}
	s.fake.Fail(discordtest.Failure{Method: "POST", Prefix: "channels/", Status: status, Body: `{"message":"no","code":0}`})
}

func (s *discordSurface) answer(p person, id uint64, choices ...int) answer {
	s.t.Helper()
	c := s.card(p, id)
	r := ref(s.t, s.w, discord.Sink, id)
	var body []byte
	s.mu.Lock()
	s.seq++
	iid := "i" + strconv.Itoa(s.seq)
	if c.has("select") { // a multi-choice question's select menu
		var values []string
		for _, i := range choices {
			values = append(values, strconv.Itoa(i))
		}
		body = discordtest.Marshal(s.t, discordtest.Click(iid, s.clicker(p), r.ChannelID, r.MessageID, s.customID(id, "select"), values...))
	} else {
		body = discordtest.Marshal(s.t, discordtest.Click(iid, s.clicker(p), r.ChannelID, r.MessageID, fmt.Sprintf("cs:answer:%d:%d", id, choices[0])))
	}
	s.last = body
	s.mu.Unlock()
	return s.post(body)
}

func (s *discordSurface) details(p person, id uint64) answer {
	s.t.Helper()
	a := s.send(p, id, s.customID(id, "details"))
	return a
}

func (s *discordSurface) channel(name string) string {
	return map[string]string{"default": "C100", "ops": "C200"}[name]
}

func (s *discordSurface) posts() int {
	n := 0
	for _, c := range s.fake.CallsTo("POST", "channels/") {
		m := c.JSON()
		if m["message_reference"] != nil {
			continue
		}
		if c.Auth != "Bot "+discordToken {
			s.t.Errorf("a card posted with Authorization %q, want the bot token", c.Auth)
		}
		if nonce, _ := m["nonce"].(string); nonce == "" || len(nonce) > 25 || m["enforce_nonce"] != true {
			s.t.Errorf("a card posted with nonce %q enforce_nonce %v, want an enforced nonce of at most 25 characters", nonce, m["enforce_nonce"])
		}
		n++
	}
	return n
}
