package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/slack-go/slack/slackevents"
)

// Slack's Events API tells Countersign when the workspace deactivates or
// removes a person: a user_change event whose user is deleted. The
// principal that Slack account is mapped to is then suspended from
// approving (bot.Chat.SuspendAccount: stored, audited, on every replica;
// their approvals of pending requests stop counting), until an admin lifts
// it (lift_suspension). A reactivated account does not lift it by itself.
// The app subscribes to the user_change bot event (users:read scope); in
// HTTP mode Slack POSTs events to /slack/events, in Socket Mode they come
// over the socket.

// eventEnvelope is what Countersign reads of an Events API request.
type eventEnvelope struct {
	Type         string          `json:"type"`      // url_verification, event_callback
	Challenge    string          `json:"challenge"` // url_verification
	TeamID       string          `json:"team_id"`
	EnterpriseID string          `json:"enterprise_id"`
	EventID      string          `json:"event_id"`
	Event        json.RawMessage `json:"event"`
}

// EventsHandler serves POST /slack/events, the Events API in HTTP mode:
// signed like interactions; the URL verification challenge answered;
// events deduplicated by their event_id.
func (a *Adapter) EventsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := a.verified(w, r)
		if !ok {
			return
		}
		if err := bot.CheckJSON("event", body); err != nil {
			http.Error(w, "the event is refused: "+err.Error(), http.StatusBadRequest)
			return
		}
		var env eventEnvelope
		if err := json.Unmarshal(body, &env); err != nil {
			http.Error(w, "not a Slack Events API request: "+err.Error(), http.StatusBadRequest)
			return
		}
		switch env.Type {
		case slackevents.URLVerification:
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(env.Challenge))
		case slackevents.CallbackEvent:
			ctx, cancel := context.WithTimeout(r.Context(), 2500*time.Millisecond)
			defer cancel()
			if err := a.event(ctx, env); err != nil {
				// Unanswered, Slack retries the event.
				http.Error(w, "the event could not be recorded; Slack will retry it", http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
}

// socketEvent handles an Events API envelope that came over the socket.
func (a *Adapter) socketEvent(ctx context.Context, ev slackevents.EventsAPIEvent) {
	cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent)
	if !ok || cb == nil || cb.InnerEvent == nil {
		return
	}
	env := eventEnvelope{Type: ev.Type, TeamID: cb.TeamID, EnterpriseID: cb.EnterpriseID, EventID: cb.EventID, Event: *cb.InnerEvent}
	if err := a.event(ctx, env); err != nil {
		a.log.Error("slack event not recorded", "event", cb.EventID, "err", err)
	}
}

// event applies one event callback: a deleted user's principal is
// suspended. Other events are ignored.
func (a *Adapter) event(ctx context.Context, env eventEnvelope) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(env.Event, &head); err != nil || head.Type != string(slackevents.UserChange) {
		return nil
	}
	var uc slackevents.UserChangeEvent
	if err := json.Unmarshal(env.Event, &uc); err != nil || !uc.User.Deleted || uc.User.ID == "" {
		return nil
	}
	if env.EventID != "" && !a.first(ctx, []string{"slack:event:" + env.EventID}) {
		return nil // seen before (Slack retries)
	}
	team := uc.User.TeamID
	if team == "" {
		team = env.TeamID
	}
	who := a.who(uc.User.ID, team, env.EnterpriseID)
	name, recorded, err := a.bot.Chat().SuspendAccount(ctx, bot.SurfaceSlack, who, "the Slack account was deactivated or removed from the workspace")
	switch {
	case err != nil:
		return err
	case name == "":
		a.log.Info("slack user deactivated; not mapped to a principal", "user", UserOf(who))
	case recorded:
		a.log.Warn("slack user deactivated: principal suspended from approving", "user", UserOf(who), "principal", name)
	}
	return nil
}
