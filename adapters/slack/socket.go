package slack

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/countersign/countersign/bot"
	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// ackTimeout bounds handing an acknowledgement to the socket's writer.
const ackTimeout = 2 * time.Second

// runSocket keeps a Socket Mode connection open until ctx ends. slack-go
// reconnects by itself when Slack asks it to or stops pinging; when it gives
// up (a revoked token, an invalid app token) this loop starts it again
// after a backoff, so a fixed token is picked up without a restart and the
// rest of Countersign keeps serving meanwhile.
func (a *Adapter) runSocket(ctx context.Context) {
	for attempt := 1; ; attempt++ {
		smc := socketmode.New(a.api,
			socketmode.OptionDialer(a.dialer),
			socketmode.OptionPingInterval(a.ping),
			socketmode.OptionReadLimit(maxRequestBody),
			socketmode.OptionLog(slog.NewLogLogger(redacting{a.log.Handler()}, slog.LevelDebug)))
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- smc.RunContext(cctx) }()
		connected := a.socketEvents(cctx, smc, done)
		cancel()
		err := <-done
		if ctx.Err() != nil {
			return
		}
		if connected {
			attempt = 1
		}
		wait := bot.Backoff(attempt)
		a.log.Error("socket mode stopped; reconnecting", "err", redactTicket(fmt.Sprint(err)), "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// socketEvents reads the client's events until it stops. It never blocks on
// work: every event is acknowledged or queued at once, because a full
// Events channel would stall the socket reader and with it pings and acks.
// It reports whether the connection was ever established.
func (a *Adapter) socketEvents(ctx context.Context, smc *socketmode.Client, done chan error) (connected bool) {
	for {
		select {
		case <-ctx.Done():
			return connected
		case err := <-done:
			done <- err // for the caller
			return connected
		case evt := <-smc.Events:
			switch evt.Type {
			case socketmode.EventTypeConnected:
				connected = true
				a.log.Info("socket mode connected")
			case socketmode.EventTypeConnectionError, socketmode.EventTypeInvalidAuth, socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage:
				a.log.Warn("socket mode", "event", evt.Type, "data", redactTicket(fmt.Sprint(evt.Data)))
			case socketmode.EventTypeInteractive:
				cb, ok := evt.Data.(slackgo.InteractionCallback)
				if !ok || evt.Request == nil {
					continue
				}
				env := evt.Request.EnvelopeID
				ack, accepted := a.interaction(ctx, cb, []string{"slack:envelope:" + env})
				if run, ok := ack.(deferredAck); ok {
					// Decided on a worker, then acknowledged with the result
					// (an edit's field errors go only in the acknowledgement).
					a.enqueue(func(jctx context.Context) {
						rctx, cancel := context.WithTimeout(jctx, editAckTimeout)
						res := run(rctx)
						cancel()
						a.ack(jctx, smc, env, res)
					})
					continue
				}
				if !accepted {
					continue // unacknowledged: Slack tells the clicker it failed
				}
				a.ack(ctx, smc, env, ack)
			case socketmode.EventTypeSlashCommand:
				cmd, ok := evt.Data.(slackgo.SlashCommand)
				if !ok || evt.Request == nil {
					continue
				}
				env := evt.Request.EnvelopeID
				queued := a.enqueue(func(jctx context.Context) {
					resp := duplicateCommand
					if a.first(jctx, []string{"slack:envelope:" + env}) {
						rctx, cancel := context.WithTimeout(jctx, 2500*time.Millisecond)
						resp = a.runCommand(rctx, cmd)
						cancel()
					}
					a.ack(jctx, smc, env, resp)
				})
				if !queued {
					a.ack(ctx, smc, env, commandResponse{ResponseType: slackgo.ResponseTypeEphemeral, Text: "Countersign is busy; run the command again in a moment."})
				}
			case socketmode.EventTypeEventsAPI:
				if evt.Request != nil {
					a.ack(ctx, smc, evt.Request.EnvelopeID, nil)
				}
				if ev, ok := evt.Data.(slackevents.EventsAPIEvent); ok && !a.enqueue(func(jctx context.Context) { a.socketEvent(jctx, ev) }) {
					a.log.Error("slack event dropped: the work queue is full", "type", ev.InnerEvent.Type)
				}
			}
		}
	}
}

// ack acknowledges an envelope, with payload unless it is nil.
func (a *Adapter) ack(ctx context.Context, smc *socketmode.Client, envelope string, payload any) {
	actx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	if err := smc.AckCtx(actx, envelope, payload); err != nil {
		a.log.Warn("socket mode acknowledgement not sent", "envelope", envelope, "err", err)
	}
}

// ticketParam is the one-time ticket in a Socket Mode WebSocket URL
// (wss://wss-primary.slack.com/link/?ticket=…&app_id=…), as a URL, or an
// error quoting one (a dial or parse error), shows it.
var ticketParam = regexp.MustCompile(`(?i)(ticket(?:=|%3D))[^&\s"'\\]+`)

// redactTicket replaces a Socket Mode connection ticket in s with
// "[redacted]": while unused, the ticket opens the app's event stream to
// whoever holds it, so no log line carries it.
func redactTicket(s string) string { return ticketParam.ReplaceAllString(s, "${1}[redacted]") }

// redacting is a slog.Handler that redacts connection tickets in the
// records slack-go's Socket Mode client logs (its messages quote errors,
// which may quote the URL) before they reach the adapter's handler.
type redacting struct{ slog.Handler }

func (h redacting) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redactTicket(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() == slog.KindString || a.Value.Kind() == slog.KindAny {
			a.Value = slog.StringValue(redactTicket(a.Value.String()))
		}
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redacting) WithAttrs(as []slog.Attr) slog.Handler { return redacting{h.Handler.WithAttrs(as)} }
func (h redacting) WithGroup(name string) slog.Handler    { return redacting{h.Handler.WithGroup(name)} }
