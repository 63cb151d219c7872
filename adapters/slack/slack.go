// Package slack is Countersign's Slack edge. It posts every pending item to
// a channel as Block Kit with Approve and Reject buttons (or a question's
// options), takes the clicks over Socket Mode or signed HTTP requests,
// decides them as the principal the clicker is mapped to through the same
// code path as the API, and updates every message of the item in place when
// it is decided. Slash commands (/countersign) go to package chat (bot/chat).
//
// Nothing is done on the acknowledgement path but verification, parsing and
// queueing: clicks are decided by a bounded pool of workers, and messages are
// posted and updated from the bot's outbox, so a Slack outage or rate limit
// never blocks a decision or an agent.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/gorilla/websocket"
	slackgo "github.com/slack-go/slack"
)

// Sink is the outbox sink name of the Slack adapter.
const Sink = "slack"

// The ways Slack delivers clicks and commands.
const (
	ModeHTTP   = "http"   // signed requests to POST /slack/interactions and /slack/commands
	ModeSocket = "socket" // Socket Mode: an outbound WebSocket opened with the app-level token
)

// CommandFunc runs a /countersign command typed by a Slack user. caller is
// the principal the user is mapped to, or nil if unmapped.
type CommandFunc func(ctx context.Context, caller *bot.Caller, userID, text string) chat.Reply

// Options configure an Adapter.
type Options struct {
	Bot  *bot.Bot
	Mode string // ModeHTTP or ModeSocket

	BotToken      string // xoxb-…: the Web API
	SigningSecret string // HTTP mode: verifies every request
	AppToken      string // Socket Mode: xapp-…, scope connections:write

	// APIURL is the Web API base, ending with '/' (default https://slack.com/api/).
	APIURL string
	// Channels maps channel names to Slack channel ids; "default" is
	// required and used for any name it does not hold.
	Channels map[string]string
	// Approvers are the directory ids (T…/U…, as QualifiedUser gives them)
	// of the mapped principals who hold the approve capability: each gets
	// the detail of a sensitive item privately, when the one rule lets them
	// see it.
	Approvers []string
	// RoleMembers maps a role name to the Slack user ids of the principals
	// holding it: an escalation to that role mentions them.
	RoleMembers map[string][]string

	// HTTPClient calls the Web API. Nil: a client with a 10 s timeout. The
	// adapter never retries inline: the outbox retries deliveries.
	HTTPClient *http.Client
	// Dialer opens the Socket Mode WebSocket. Nil: a dialer with a 10 s
	// handshake timeout that honours the proxy environment.
	Dialer *websocket.Dialer
	// PingInterval is how long Socket Mode waits for a ping from Slack
	// before it reconnects (default 30 s).
	PingInterval time.Duration

	// Workers decide clicks after they are acknowledged (default 4);
	// QueueSize bounds the clicks waiting for a worker (default 256). A
	// click that finds the queue full is not acknowledged, so Slack shows
	// the clicker an error and nothing is lost silently.
	Workers   int
	QueueSize int
	// Poll is how often the outbox is looked at when idle (default 2 s).
	Poll time.Duration

	// Commands runs slash commands. Nil: chat.Run.
	Commands CommandFunc
	Logger   *slog.Logger
}

// Adapter connects one Slack app to the bot.
type Adapter struct {
	bot         *bot.Bot
	api         *slackgo.Client
	log         *slog.Logger
	mode        string
	secret      string
	channels    map[string]string
	approvers   []string
	roleMembers map[string][]string
	dialer      *websocket.Dialer
	ping        time.Duration
	workers     int
	poll        time.Duration
	commands    CommandFunc
	jobs        chan job
}

// job is work done after an acknowledgement, on a worker.
type job func(ctx context.Context)

// New checks the options and returns an adapter. It does no network I/O.
func New(o Options) (*Adapter, error) {
	var problems []string
	if o.Bot == nil {
		problems = append(problems, "no bot")
	}
	switch o.Mode {
	case ModeHTTP:
		if o.SigningSecret == "" {
			problems = append(problems, "http mode needs the signing secret")
		}
	case ModeSocket:
		if o.AppToken == "" {
			problems = append(problems, "socket mode needs the app-level token (xapp-…)")
		}
	default:
		problems = append(problems, fmt.Sprintf("mode %q: use %s or %s", o.Mode, ModeHTTP, ModeSocket))
	}
	if o.BotToken == "" {
		problems = append(problems, "no bot token (xoxb-…)")
	}
	if o.APIURL == "" {
		o.APIURL = "https://slack.com/api/"
	}
	if !strings.HasSuffix(o.APIURL, "/") {
		problems = append(problems, "the API URL must end with '/'")
	}
	if o.Channels["default"] == "" {
		problems = append(problems, "no default channel")
	}
	for _, id := range append(slices.Concat(slices.Collect(maps.Values(o.RoleMembers))...), o.Approvers...) {
		if !ValidUserID(UserOf(id)) {
			problems = append(problems, fmt.Sprintf("%q is not a Slack user id (U… or W…, capital letters and digits)", id))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("slack: " + strings.Join(problems, "; "))
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Dialer == nil {
		o.Dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 10 * time.Second, NetDialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 256
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Adapter{
		bot: o.Bot, log: o.Logger.With("surface", "slack"), mode: o.Mode, secret: o.SigningSecret,
		channels: o.Channels, approvers: o.Approvers, roleMembers: o.RoleMembers, dialer: o.Dialer, ping: o.PingInterval,
		workers: o.Workers, poll: o.Poll, commands: o.Commands, jobs: make(chan job, o.QueueSize),
	}
	if a.commands == nil {
		b := o.Bot
		a.commands = func(ctx context.Context, caller *bot.Caller, userID, text string) chat.Reply {
			return chat.Run(ctx, b, caller, Sink, userID, text)
		}
	}
	// No OptionRetry: a retry could sleep for a Retry-After of a minute on
	// the acknowledgement path; the outbox retries deliveries instead.
	opts := []slackgo.Option{slackgo.OptionHTTPClient(o.HTTPClient), slackgo.OptionAPIURL(o.APIURL)}
	if o.AppToken != "" {
		opts = append(opts, slackgo.OptionAppLevelToken(o.AppToken))
	}
	a.api = slackgo.New(o.BotToken, opts...)
	return a, nil
}

// Run is RunClicks and RunOutbox together, until ctx ends: what one
// process serving Slack alone runs.
func (a *Adapter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.RunClicks(ctx) })
	wg.Go(func() { _ = a.RunOutbox(ctx) })
	wg.Wait()
	return ctx.Err()
}

// RunClicks decides the clicks and commands this process acknowledged, on
// the worker pool, until ctx ends; those already acknowledged are still
// decided, within a few seconds, on the way out. Every process that
// serves Slack's HTTP routes runs it (each replica: a click is decided by
// the replica that acknowledged it).
func (a *Adapter) RunClicks(ctx context.Context) error {
	var wg sync.WaitGroup
	for range a.workers {
		wg.Go(func() { a.work(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// RunOutbox drains the outbox to Slack and, in Socket Mode, keeps the
// WebSocket open, until ctx ends. Of several replicas only the leader runs
// it: each event is delivered once, and one connection receives events.
func (a *Adapter) RunOutbox(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.bot.Outbox().Serve(ctx, Sink, a.poll, a.Renderer()); err != nil && !errors.Is(err, context.Canceled) {
			a.log.Error("outbox worker stopped", "err", err)
		}
	})
	if a.mode == ModeSocket {
		wg.Go(func() { a.runSocket(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// ValidUserID reports whether id looks like a Slack user id (U… or W…,
// capital letters and digits), so that a mention built from it cannot carry
// other markup.
func ValidUserID(id string) bool {
	if len(id) < 2 || len(id) > 32 || (id[0] != 'U' && id[0] != 'W') {
		return false
	}
	for _, r := range id {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// enqueue hands j to the workers without blocking; false if the queue is full.
func (a *Adapter) enqueue(j job) bool {
	select {
	case a.jobs <- j:
		return true
	default:
		a.log.Warn("click queue full; not acknowledged so that Slack reports it to the user")
		return false
	}
}

// enqueueFrom is enqueue for work that continues the request of from: the
// job's context carries from's request id and trace span (bot.Continued).
func (a *Adapter) enqueueFrom(from context.Context, j job) bool {
	return a.enqueue(func(ctx context.Context) { j(bot.Continued(ctx, from)) })
}

// jobTimeout bounds one job (a decision and a private answer).
const jobTimeout = 30 * time.Second

func (a *Adapter) work(ctx context.Context) {
	for {
		select {
		case j := <-a.jobs:
			a.runJob(ctx, j)
		case <-ctx.Done():
			// Finish what was acknowledged before the shutdown.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			for {
				select {
				case j := <-a.jobs:
					a.runJob(dctx, j)
				default:
					return
				}
			}
		}
	}
}

func (a *Adapter) runJob(ctx context.Context, j job) {
	ctx, cancel := context.WithTimeout(ctx, jobTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("slack job panicked", "panic", r)
		}
	}()
	j(ctx)
}
