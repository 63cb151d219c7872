package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign/bot"
	slackgo "github.com/slack-go/slack"
)

// maxRequestBody bounds a Slack request; real payloads are a few kilobytes.
const maxRequestBody = 1 << 20

// InteractionsHandler serves POST /slack/interactions: button clicks and
// reason forms, signed with the app's signing secret. It answers within
// Slack's 3 seconds: it verifies, parses and queues, and decides later.
func (a *Adapter) InteractionsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verified(w, r)
		if !ok {
			return
		}
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("payload") == "" {
			http.Error(w, "expected a form with a payload field (application/x-www-form-urlencoded)", http.StatusBadRequest)
			return
		}
		payload := []byte(form.Get("payload"))
		// Signed by Slack, and still refused when two readers could see it
		// differently (bot.CheckJSON).
		if err := bot.CheckJSON("payload", payload); err != nil {
			http.Error(w, "the interaction is refused: "+err.Error(), http.StatusBadRequest)
			return
		}
		var cb slackgo.InteractionCallback
		if err := json.Unmarshal(payload, &cb); err != nil {
			http.Error(w, "payload is not a Slack interaction: "+err.Error(), http.StatusBadRequest)
			return
		}
		ack, accepted := a.interaction(r.Context(), cb, nil)
		if run, ok := ack.(deferredAck); ok {
			ctx, cancel := context.WithTimeout(r.Context(), editAckTimeout)
			ack = run(ctx)
			cancel()
		}
		if !accepted {
			http.Error(w, "busy; try again", http.StatusServiceUnavailable)
			return
		}
		if ack == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		writeJSON(w, ack)
	})
}

// CommandsHandler serves POST /slack/commands: the /countersign slash
// command, signed like interactions. The answer is the response body,
// visible only to the user who typed it unless chat says otherwise.
func (a *Adapter) CommandsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verified(w, r)
		if !ok {
			return
		}
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("user_id") == "" {
			http.Error(w, "expected a slash command form with user_id (application/x-www-form-urlencoded)", http.StatusBadRequest)
			return
		}
		cmd := slackgo.SlashCommand{
			TeamID: form.Get("team_id"), EnterpriseID: form.Get("enterprise_id"), ChannelID: form.Get("channel_id"), UserID: form.Get("user_id"),
			Command: form.Get("command"), Text: form.Get("text"), TriggerID: form.Get("trigger_id"),
		}
		if cmd.TriggerID != "" && !a.first(r.Context(), []string{"slack:trigger:" + cmd.TriggerID}) {
			writeJSON(w, duplicateCommand)
			return
		}
		// Slack waits 3 seconds for this body; a command that takes longer
		// is cut short rather than answered after Slack gave up.
		ctx, cancel := context.WithTimeout(r.Context(), 2500*time.Millisecond)
		defer cancel()
		writeJSON(w, a.runCommand(ctx, cmd))
	})
}

// verified reads the raw body and checks Slack's signature over it and the
// 5-minute timestamp window. On failure it answers 401 (or 413/400) and
// returns false. Verification does not deduplicate: replays inside the
// window are caught by the delivery records and the one-decision rule.
func (a *Adapter) verified(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "could not read the request body", http.StatusBadRequest)
		return nil, false
	}
	sv, err := slackgo.NewSecretsVerifier(r.Header, a.secret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		a.log.Warn("unsigned or stale slack request rejected", "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err.Error())
		http.Error(w, "invalid Slack request signature or timestamp", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
