package chattest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/teams"
	"github.com/countersign/countersign/adapters/teams/teamstest"
	"github.com/countersign/countersign/bot"
)

const (
	teamsAppID    = "11111111-2222-3333-4444-555555555555"
	teamsPassword = "client-secret"
	teamsTenant   = "99999999-8888-7777-6666-555555555555"
	teamsOps      = "19:ops@thread.tacv2"
	teamsDefault  = "19:default@thread.tacv2"
)

// teamsSurface is the Teams adapter's messaging endpoint on a loopback
// port, teamstest behind it (Bot Connector, token endpoint and issuer).
// A card's buttons are personal: the shared card names the eligible
// approvers in refresh.userIds, and their clients fetch their own view.
type teamsSurface struct {
	t    *testing.T
	w    *world
	fake *teamstest.Server
	ad   *teams.Adapter
	url  string
	stop func()
	mu   sync.Mutex
	seq  int
	last map[string]any // the last activity, to replay
}

func mri(p person) string { return "29:1-" + people.teams[p][len(people.teams[p])-4:] }

func newTeams(t *testing.T) surface {
	t.Helper()
	fake := teamstest.New(t, teamsAppID, teamsPassword)
	for _, conv := range []string{teamsOps, teamsDefault} {
		for _, p := range []person{approver, second, viewer, stranger} {
			fake.AddMember(conv, people.teams[p], mri(p))
		}
	}
	s := &teamsSurface{t: t, w: newWorld(t, teams.Sink), fake: fake}
	s.start()
	return s
}

// start builds the adapter on the world's bot and serves its messaging
// endpoint on a new loopback port until stop.
func (s *teamsSurface) start() {
	t := s.t
	t.Helper()
	ad, err := teams.New(teams.Options{
		Bot: s.w.bot, AppID: teamsAppID, AppPassword: teamsPassword, TenantID: teamsTenant,
		APIURL: s.fake.APIURL, TokenURL: s.fake.TokenURL, OpenIDMetadataURL: s.fake.MetadataURL, Issuer: s.fake.Issuer,
		Channels:    map[string]string{"default": teamsDefault, "ops": teamsOps},
		Approvers:   []string{people.teams[approver], people.teams[second]},
		RoleMembers: map[string][]teams.Member{"member": {{ID: people.teams[approver], Name: "dr_smith"}, {ID: people.teams[second], Name: "nurse_jo"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /teams/messages", ad.Handler())
	srv := httptest.NewServer(mux)
	s.stop = srv.Close
	t.Cleanup(srv.Close)
	s.ad, s.url = ad, srv.URL+"/teams/messages"
}

func (s *teamsSurface) restart() {
	s.t.Helper()
	s.stop()
	s.w.close()
	s.w.open()
	s.start()
}

func (s *teamsSurface) world() *world { return s.w }
func (s *teamsSurface) name() string  { return teams.Sink }

func (s *teamsSurface) who(p person) string {
	if p == stranger {
		return "unmapped [" + people.teams[p] + "]"
	}
	return names[p] + " [" + people.teams[p] + "]"
}

func (s *teamsSurface) drain() {
	s.t.Helper()
	o := s.w.bot.Outbox()
	if err := o.Drain(context.Background(), teams.Sink, o.DeliverTo(teams.Sink, s.ad.Renderer())); err != nil {
		s.t.Fatal(err)
	}
}

// verbs are a card's Action.Execute actions by verb, with their data.
func verbs(c map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	acts, _ := c["actions"].([]any)
	for _, a := range acts {
		m, _ := a.(map[string]any)
		if m["type"] == "Action.Execute" {
			d, _ := m["data"].(map[string]any)
			out[fmt.Sprint(m["verb"])] = d
		}
	}
	return out
}

// style is the style of the card's action of verb ("" none).
func style(c map[string]any, verb string) string {
	acts, _ := c["actions"].([]any)
	for _, a := range acts {
		if m, _ := a.(map[string]any); m["verb"] == verb {
			s, _ := m["style"].(string)
			return s
		}
	}
	return ""
}

// notice is the private line on top of a card answered to the clicker
// (itemCard's notice) when it is a warning: a refusal or a note.
func notice(c map[string]any) string {
	body, _ := c["body"].([]any)
	if len(body) == 0 {
		return ""
	}
	tb, _ := body[0].(map[string]any)
	if tb["type"] != "TextBlock" || tb["weight"] != "Bolder" || tb["color"] != "attention" {
		return ""
	}
	return unmarked(fmt.Sprint(tb["text"]))
}

func (s *teamsSurface) cardOf(c map[string]any) card {
	out := card{text: unmarked(strings.Join(texts(c), "\n"))}
	for v := range verbs(c) {
		if v == "refresh" || v == "details" {
			continue
		}
		out.buttons = append(out.buttons, v)
	}
	if style(c, "approve") == "destructive" {
		out.danger = "the destructive Approve opens a confirmation step"
	}
	return out
}

// shared is item id's card in its channel, as the fake holds it.
func (s *teamsSurface) shared(id uint64) map[string]any {
	s.t.Helper()
	m, ok := s.fake.Message(ref(s.t, s.w, teams.Sink, id).MessageID)
	if !ok || m.Card() == nil {
		s.t.Fatalf("the fake holds no card of item %d, want its posted card", id)
	}
	return m.Card()
}

// view is the card p's client shows: the shared one, or p's own when
// the shared card's refresh names p.
func (s *teamsSurface) view(p person, id uint64) map[string]any {
	s.t.Helper()
	c := s.shared(id)
	ref, _ := c["refresh"].(map[string]any)
	if ref == nil || !strings.Contains(fmt.Sprint(ref["userIds"]), mri(p)) {
		return c
	}
	data, _ := ref["action"].(map[string]any)["data"].(map[string]any)
	a := s.invoke(p, id, "refresh", strData(data))
	if a.raw == nil {
		s.t.Fatalf("refreshing item %d's card for %v answered %q, want a card", id, p, a.private)
	}
	return a.raw
}

func strData(d map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range d {
		out[k] = fmt.Sprint(v)
	}
	return out
}

func (s *teamsSurface) card(p person, id uint64) card { return s.cardOf(s.view(p, id)) }

func (s *teamsSurface) edits(id uint64) int {
	r := ref(s.t, s.w, teams.Sink, id)
	return len(s.fake.CallsTo("PUT", "v3/conversations/"+r.ChannelID+"/activities/"+r.MessageID))
}

// data is the data of button on the approver's view of item id (the
// only view with buttons); a person without them sends it forged.
func (s *teamsSurface) data(id uint64, button string) map[string]string {
	if d := verbs(s.view(approver, id))[button]; d != nil {
		return strData(d)
	}
	return map[string]string{"item": fmt.Sprint(id)}
}

func (s *teamsSurface) click(p person, id uint64, button string) answer {
	s.t.Helper()
	a := s.invoke(p, id, button, s.data(id, button))
	if a.step {
		return s.invoke(p, id, "approve_confirm", a.stepData).answer
	}
	return a.answer
}

func (s *teamsSurface) unconfirmed(p person, id uint64) answer {
	s.t.Helper()
	return s.invoke(p, id, "approve", s.data(id, "approve")).answer
}

func (s *teamsSurface) replay() answer {
	s.t.Helper()
	s.mu.Lock()
	act := s.last
	s.mu.Unlock()
	return s.send(act).answer
}

type teamsAnswer struct {
	answer
	raw      map[string]any    // the card answered
	stepData map[string]string // the confirmation step's approve_confirm data
	formData map[string]string // the reason form's reject_submit data
}

// activity is an adaptiveCard/action invoke from p on item id's card.
func (s *teamsSurface) activity(p person, id uint64, verb string, data map[string]string) map[string]any {
	r := ref(s.t, s.w, teams.Sink, id)
	msg := r.MessageID
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	return map[string]any{
		"type": "invoke", "name": "adaptiveCard/action", "id": fmt.Sprintf("act-%d", n), "channelId": "msteams",
		"serviceUrl": s.fake.APIURL, "timestamp": s.w.clock.Now().UTC().Format("2006-01-02T15:04:05Z"),
		"from":         map[string]any{"id": mri(p), "aadObjectId": people.teams[p], "name": "someone"},
		"recipient":    map[string]any{"id": "28:" + teamsAppID, "name": "Countersign"},
		"conversation": map[string]any{"id": r.ChannelID + ";messageid=" + msg, "conversationType": "channel", "tenantId": teamsTenant},
		"channelData":  map[string]any{"tenant": map[string]any{"id": teamsTenant}},
		"replyToId":    msg,
		"value":        map[string]any{"action": map[string]any{"type": "Action.Execute", "verb": verb, "data": data}, "trigger": "manual"},
	}
}

func (s *teamsSurface) invoke(p person, id uint64, verb string, data map[string]string) teamsAnswer {
	s.t.Helper()
	act := s.activity(p, id, verb, data)
	if verb != "refresh" {
		s.mu.Lock()
		s.last = act
		s.mu.Unlock()
	}
	return s.send(act)
}

// send posts activity with a good token and normalises the invoke
// response: a card replaces the clicked one for the clicker; a message
// is shown to the clicker alone.
func (s *teamsSurface) send(act map[string]any) teamsAnswer {
	s.t.Helper()
	status, body := s.fake.Send(s.url, act, s.fake.Sign(s.fake.Claims(s.w.clock.Now())))
	if status != http.StatusOK {
		s.t.Fatalf("invoke answered %d %s, want 200", status, body)
	}
	var r struct {
		StatusCode int             `json:"statusCode"`
		Type       string          `json:"type"`
		Value      json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.StatusCode != 200 {
		s.t.Fatalf("invoke response %s (%v), want an adaptiveCard/action answer with statusCode 200", body, err)
	}
	switch r.Type {
	case "application/vnd.microsoft.card.adaptive":
		var c map[string]any
		_ = json.Unmarshal(r.Value, &c)
		out := teamsAnswer{raw: c}
		if d := verbs(c)["reject_submit"]; d != nil && notice(c) == "" {
			out.form, out.formData = "reject_submit", strData(d)
			return out
		}
		if d := verbs(c)["approve_confirm"]; d != nil {
			out.step, out.stepData = true, strData(d)
			out.private = unmarked(strings.Join(texts(c), "\n"))
			return out
		}
		if n := notice(c); n != "" {
			out.private = n
			return out
		}
		cc := s.cardOf(c)
		out.card = &cc
		return out
	case "application/vnd.microsoft.activity.message":
		var text string
		_ = json.Unmarshal(r.Value, &text)
		return teamsAnswer{answer: answer{private: text}}
	}
	s.t.Fatalf("invoke response of type %q, want a card or a message", r.Type)
	return teamsAnswer{}
}

func (s *teamsSurface) forged(id uint64) map[string]int {
	s.t.Helper()
	act := s.activity(approver, id, "approve", s.data(id, "approve"))
	now := s.w.clock.Now()
	expired := s.fake.Claims(now)
	expired["exp"] = now.Add(-10 * 60e9).Unix()
	otherApp := s.fake.Claims(now)
	otherApp["aud"] = "22222222-2222-2222-2222-222222222222"
	otherService := s.fake.Claims(now)
	otherService["serviceurl"] = "https://attacker.example/"
	out := map[string]int{}
	for name, tok := range map[string]string{
		"no token": "", "signed with another key": s.fake.Forged(s.fake.Claims(now)), "expired": s.fake.Sign(expired),
		"for another app": s.fake.Sign(otherApp), "for another service URL": s.fake.Sign(otherService),
	} {
		out[name], _ = s.fake.Send(s.url, act, tok)
	}
	moved := s.activity(approver, id, "approve", s.data(id, "approve"))
	moved["serviceUrl"] = "https://attacker.example/"
	out["naming another service URL than its token"], _ = s.fake.Send(s.url, moved, s.fake.Sign(s.fake.Claims(now)))
	return out
}

func (s *teamsSurface) doubled(id uint64) (int, string, string) {
	s.t.Helper()
	act := s.activity(approver, id, "approve", s.data(id, "approve"))
	b, err := json.Marshal(act)
	if err != nil {
		s.t.Fatal(err)
	}
	doubled := strings.Replace(string(b), `"verb":"approve"`, `"verb":"refresh","verb":"approve"`, 1)
	if doubled == string(b) {
		s.t.Fatalf("activity %s, want a verb to give twice", b)
	}
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(doubled))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.fake.Sign(s.fake.Claims(s.w.clock.Now())))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), "activity.value.action.verb"
}

func (s *teamsSurface) reject(p person, id uint64, reason string) answer {
	s.t.Helper()
	a := s.invoke(p, id, "reject", s.data(id, "reject"))
	if a.form == "" {
		return a.answer // refused before the form
	}
	data := map[string]string{}
	for k, v := range a.formData {
		data[k] = v
	}
	data["reason"] = reason // the form's input, as Teams merges it into the data
	return s.invoke(p, id, "reject_submit", data).answer
}

func (s *teamsSurface) replies(id uint64) []string {
	r := ref(s.t, s.w, teams.Sink, id)
	var out []string
	for _, m := range s.fake.Messages(r.ChannelID) {
		if m.ReplyTo == r.MessageID {
			out = append(out, fmt.Sprint(m.Activity["text"]))
		}
	}
	return out
}

func (s *teamsSurface) renderer() bot.Renderer { return s.ad.Renderer() }

func (s *teamsSurface) throttle(after time.Duration) {
	s.fake.Fail(teamstest.Failure{Method: "POST", PathPrefix: "v3/conversations/", Status: http.StatusTooManyRequests,
		Header: map[string]string{"Retry-After": fmt.Sprint(int(after / time.Second))}, Body: `{"error":{"code":"TooManyRequests","message":"slow down"}}`})
}

func (s *teamsSurface) refuse(permanent bool) {
	f := teamstest.Failure{Method: "POST", PathPrefix: "v3/conversations/", Status: http.StatusServiceUnavailable, Body: `{"error":{"code":"ServiceUnavailable","message":"down"}}`}
	if permanent {
		f.Status, f.Body = http.StatusForbidden, `{"error":{"code":"BotNotInConversationRoster","message":"not a member"}}`
	}
	s.fake.Fail(f)
}

func (s *teamsSurface) answer(p person, id uint64, choices ...int) answer {
	s.t.Helper()
	v := verbs(s.view(p, id))
	if d := v["answer_multi"]; d != nil {
		data := strData(d)
		var cs []string
		for _, c := range choices {
			cs = append(cs, fmt.Sprint(c))
		}
		data["choices"] = strings.Join(cs, ",") // the choice set's input, as Teams merges it into the data
		return s.invoke(p, id, "answer_multi", data).answer
	}
	data := map[string]string{"item": fmt.Sprint(id), "option": fmt.Sprint(choices[0])}
	for verb, d := range v {
		if verb == "answer" && fmt.Sprint(d["option"]) == fmt.Sprint(choices[0]) {
			data = strData(d)
		}
	}
	return s.invoke(p, id, "answer", data).answer
}

func (s *teamsSurface) details(p person, id uint64) answer {
	s.t.Helper()
	a := s.invoke(p, id, "details", map[string]string{"item": fmt.Sprint(id)})
	if a.raw != nil && a.private == "" {
		a.detail = unmarked(strings.Join(texts(a.raw), "\n"))
	}
	return a.answer
}

func (s *teamsSurface) channel(name string) string {
	return map[string]string{"default": teamsDefault, "ops": teamsOps}[name]
}

func (s *teamsSurface) posts() int {
	n := 0
	for _, c := range s.fake.Calls() {
		if !strings.HasPrefix(c.Auth, "Bearer fake-access-token-") {
			s.t.Errorf("%s %s without the client-credentials token: %q", c.Method, c.Path, c.Auth)
		}
		if c.Method == "POST" && strings.HasSuffix(c.Path, "/activities") {
			n++ // a card; a reply goes to activities/{id}
		}
	}
	return n
}
