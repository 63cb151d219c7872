// Package teams is Countersign's Microsoft Teams edge, a chat surface like
// Slack and Discord: a parser for what Teams sends and a renderer for what
// Countersign posts.
//
// Inbound, the Bot Framework delivers activities to POST /teams/messages.
// Every request carries a JWT that the handler checks before reading the
// activity: signed by a key of the issuer's JWKS (found from its OpenID
// metadata), issued by the Bot Framework, for this app (the audience is the
// app id), unexpired, and naming in its serviceurl claim the service URL
// the activity says it came from. A click on a card (an Adaptive Card
// Universal Action, an adaptiveCard/action invoke) is parsed into a
// chat.Decision and decided by chat.Decide as the principal the clicker's
// Entra object id is mapped to (principals[].teams); the answer goes back
// in the invoke's response, seen only by the clicker. A message typed to
// the bot is a chat command, as /countersign is in Slack.
//
// Outbound, the renderer (bot.Renderer) posts an item's card to a
// configured channel or conversation through the Bot Connector REST API
// with a client-credentials token, replaces it whenever the item changes,
// and replies in its thread. The card is an Adaptive Card 1.5 whose
// refresh names the eligible approvers (refresh.userIds): Teams asks the
// bot for their view of the card, with the buttons; everyone else sees the
// card without them.
package teams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// Sink is the outbox sink name of the Teams adapter.
const Sink = "teams"

// Defaults of the public Bot Framework.
const (
	// DefaultAPIURL is the Bot Connector service URL of Teams (the
	// serviceUrl Teams activities carry; a tenant in another region may
	// have its own, shown in every activity the bot receives).
	DefaultAPIURL = "https://smba.trafficmanager.net/teams/"
	// DefaultOpenIDMetadataURL is where the Bot Framework publishes the
	// keys that sign the tokens of its requests.
	DefaultOpenIDMetadataURL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
	// DefaultIssuer is the issuer of those tokens.
	DefaultIssuer = "https://api.botframework.com"
	// DefaultTokenURL is the token endpoint of a multi-tenant bot's
	// client-credentials grant; a single-tenant bot uses its tenant's
	// (https://login.microsoftonline.com/<tenant id>/oauth2/v2.0/token).
	DefaultTokenURL = "https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token"
	// ConnectorScope is the scope of the Bot Connector's access token.
	ConnectorScope = "https://api.botframework.com/.default"
)

// CommandFunc runs a command typed to the bot. caller is the principal
// the user is mapped to, or nil if unmapped.
type CommandFunc func(ctx context.Context, caller *bot.Caller, userID, text string) chat.Reply

// Options configure an Adapter.
type Options struct {
	Bot *bot.Bot
	// AppID is the bot's Microsoft app id (the audience of inbound tokens,
	// the client id of outbound ones); AppPassword its client secret.
	AppID       string
	AppPassword string
	// TenantID, when set, is the only Entra tenant whose activities are
	// taken: any other is refused (403).
	TenantID string
	// APIURL is the Bot Connector service URL, ending with '/' (default
	// DefaultAPIURL).
	APIURL string
	// TokenURL is the client-credentials token endpoint (default
	// DefaultTokenURL).
	TokenURL string
	// OpenIDMetadataURL is the OpenID metadata of the issuer of inbound
	// tokens (default DefaultOpenIDMetadataURL), Issuer that issuer
	// (default DefaultIssuer). Tests point both at a local issuer.
	OpenIDMetadataURL string
	Issuer            string
	// Channels maps channel names to Teams conversation ids (a channel's
	// 19:…@thread.tacv2, a chat's 19:…@thread.v2 or a personal chat's
	// a:…); "default" is required and used for any name it does not hold.
	Channels map[string]string
	// Approvers are the Entra object ids of the mapped principals: those
	// the one rule lets decide an item are named in its card's
	// refresh.userIds, and so see the buttons.
	Approvers []string
	// RoleMembers maps a role name to the Entra object ids of the
	// principals holding it: an escalation to that role mentions them.
	RoleMembers map[string][]Member
	// HTTPClient calls the Bot Connector, the token endpoint and the
	// issuer's metadata (nil: a client with a 10 s timeout). The adapter
	// never retries: the outbox retries deliveries.
	HTTPClient *http.Client
	// Poll is how often the outbox is looked at when idle (default 2 s).
	Poll time.Duration
	// Workers answer typed commands after they are acknowledged (default
	// 2); QueueSize bounds those waiting (default 64).
	Workers   int
	QueueSize int
	// Commands runs typed commands. Nil: chat.Run.
	Commands CommandFunc
	// Now is the clock of token checks (nil: the bot's).
	Now    func() time.Time
	Logger *slog.Logger
}

// Member is a person an escalation mentions: their Entra object id and
// the name shown.
type Member struct {
	ID   string
	Name string
}

// Adapter connects one Teams bot to Countersign.
type Adapter struct {
	bot         *bot.Bot
	log         *slog.Logger
	appID       string
	tenant      string
	channels    map[string]string
	approvers   []string
	roleMembers map[string][]Member
	poll        time.Duration
	workers     int
	commands    CommandFunc
	jobs        chan func(context.Context)
	auth        *verifier
	api         *connector

	// mris maps an Entra object id to the Teams user id (29:…) that
	// refresh.userIds takes: learnt from every activity the user sends,
	// else asked of the Bot Connector once.
	mriMu sync.Mutex
	mris  map[string]string
}

// New checks the options and returns an adapter. It does no network I/O.
func New(o Options) (*Adapter, error) {
	var problems []string
	if o.Bot == nil {
		problems = append(problems, "no bot")
	}
	if !ValidObjectID(o.AppID) {
		problems = append(problems, "the app id must be the bot's Microsoft app id (a GUID)")
	}
	if o.AppPassword == "" {
		problems = append(problems, "no app password (client secret)")
	}
	if o.TenantID != "" && !ValidObjectID(o.TenantID) {
		problems = append(problems, fmt.Sprintf("tenant id %q is not a GUID", o.TenantID))
	}
	o.APIURL = orDefault(o.APIURL, DefaultAPIURL)
	o.TokenURL = orDefault(o.TokenURL, DefaultTokenURL)
	o.OpenIDMetadataURL = orDefault(o.OpenIDMetadataURL, DefaultOpenIDMetadataURL)
	o.Issuer = orDefault(o.Issuer, DefaultIssuer)
	if !strings.HasSuffix(o.APIURL, "/") {
		problems = append(problems, "the API URL must end with '/'")
	}
	for name, u := range map[string]string{"API URL": o.APIURL, "token URL": o.TokenURL, "OpenID metadata URL": o.OpenIDMetadataURL} {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			problems = append(problems, fmt.Sprintf("the %s %q is not an http(s) URL", name, u))
		}
	}
	if o.Channels["default"] == "" {
		problems = append(problems, "no default channel")
	}
	for name, id := range o.Channels {
		if id != "" && !validConversationID(id) {
			problems = append(problems, fmt.Sprintf("channel %s: %q is not a Teams conversation id (such as 19:…@thread.tacv2)", name, id))
		}
	}
	for _, id := range o.Approvers {
		if !ValidObjectID(id) {
			problems = append(problems, fmt.Sprintf("%q is not an Entra object id (a GUID)", id))
		}
	}
	for _, ms := range o.RoleMembers {
		for _, m := range ms {
			if !ValidObjectID(m.ID) {
				problems = append(problems, fmt.Sprintf("%q is not an Entra object id (a GUID)", m.ID))
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("teams: " + strings.Join(problems, "; "))
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = o.Bot.Now
	}
	a := &Adapter{
		bot: o.Bot, log: o.Logger.With("surface", Sink), appID: strings.ToLower(o.AppID), tenant: strings.ToLower(o.TenantID),
		channels: o.Channels, approvers: lowerAll(o.Approvers), roleMembers: o.RoleMembers,
		poll: o.Poll, workers: o.Workers, commands: o.Commands, jobs: make(chan func(context.Context), o.QueueSize),
		mris: map[string]string{},
	}
	auth, err := newVerifier(o.OpenIDMetadataURL, o.Issuer, o.AppID, o.HTTPClient, o.Now, a.log)
	if err != nil {
		return nil, err
	}
	a.auth = auth
	a.api = newConnector(o.APIURL, o.TokenURL, o.AppID, o.AppPassword, o.HTTPClient)
	if a.commands == nil {
		b := o.Bot
		a.commands = func(ctx context.Context, caller *bot.Caller, userID, text string) chat.Reply {
			return chat.Run(ctx, b, caller, bot.SurfaceTeams, userID, text)
		}
	}
	return a, nil
}

// Run is RunActivities and RunOutbox together, until ctx ends: what one
// process serving Teams alone runs.
func (a *Adapter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.RunActivities(ctx) })
	wg.Go(func() { _ = a.RunOutbox(ctx) })
	wg.Wait()
	return ctx.Err()
}

// RunActivities runs the work this process acknowledged (commands and
// their answers) on the worker pool until ctx ends. Every process that
// serves POST /teams/messages runs it (each replica).
func (a *Adapter) RunActivities(ctx context.Context) error {
	var wg sync.WaitGroup
	for range a.workers {
		wg.Go(func() { a.work(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// RunOutbox drains the outbox to Teams until ctx ends. Of several
// replicas only the leader runs it: each event is delivered once.
func (a *Adapter) RunOutbox(ctx context.Context) error {
	if err := a.bot.Outbox().Serve(ctx, Sink, a.poll, a.Renderer()); err != nil && !errors.Is(err, context.Canceled) {
		a.log.Error("outbox worker stopped", "err", err)
	}
	return ctx.Err()
}

// jobTimeout bounds one job (a command and its answer).
const jobTimeout = 30 * time.Second

func (a *Adapter) work(ctx context.Context) {
	for {
		select {
		case j := <-a.jobs:
			a.runJob(ctx, j)
		case <-ctx.Done():
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

func (a *Adapter) runJob(ctx context.Context, j func(context.Context)) {
	ctx, cancel := context.WithTimeout(ctx, jobTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("teams job panicked", "panic", r)
		}
	}()
	j(ctx)
}

// enqueue hands j to the workers without blocking, continuing the request
// of from; false if the queue is full.
func (a *Adapter) enqueue(from context.Context, j func(context.Context)) bool {
	select {
	case a.jobs <- func(ctx context.Context) { j(bot.Continued(ctx, from)) }:
		return true
	default:
		a.log.Warn("command queue full; not acknowledged so that Teams reports it")
		return false
	}
}

// ValidObjectID reports whether id is a GUID, the form of an Entra object
// id, a tenant id and a Microsoft app id.
func ValidObjectID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, r := range id {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if (r < '0' || r > '9') && (r < 'a' || r > 'f') && (r < 'A' || r > 'F') {
				return false
			}
		}
	}
	return true
}

// validConversationID reports whether id can be put in a Bot Connector
// path: printable, no '/', '?', '#', space or '%'.
func validConversationID(id string) bool {
	if len(id) < 3 || len(id) > 512 {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r == '/' || r == '?' || r == '#' || r == '%' || r == '\\' || r > '~' {
			return false
		}
	}
	return true
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return strings.TrimSpace(s)
}

func lowerAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}
