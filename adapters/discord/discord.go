// Package discord is Countersign's Discord edge. It posts every pending item
// as a message with an embed and buttons, takes the clicks (over the gateway
// or the Ed25519-signed HTTP interactions endpoint), decides them as the
// principal the clicker is mapped to through the same code path as the API,
// and edits every message of an item in place as the item moves.
//
// Nothing here blocks an agent: messages are posted and edited from the
// bot's outbox, retried with backoff (a 429 after its retry_after), and the
// decision path never waits on Discord.
package discord

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
	"github.com/gorilla/websocket"
)

// Sink is the outbox sink name of Discord; an item's messages are
// recorded with this platform name.
const Sink = "discord"

// DefaultAPIURL is Discord's REST API.
const DefaultAPIURL = "https://discord.com/api/v10/"

// Options configure an Adapter.
type Options struct {
	Bot *bot.Bot // required
	// Token is the bot token, with or without its "Bot " prefix. Required.
	Token string
	// PublicKey is the application's Ed25519 public key that signs
	// interactions sent to the HTTP endpoint. Without it the endpoint
	// refuses every request.
	PublicKey ed25519.PublicKey
	// ApplicationID is needed to register the /countersign command.
	ApplicationID string
	// GuildID, when set, is the one server whose interactions are
	// accepted; interactions from direct messages or other servers are
	// refused privately and audited.
	GuildID string
	// APIURL is where REST calls go (default DefaultAPIURL). It must be
	// https, except for a loopback host (a test fake).
	APIURL string
	// Channels maps configured channel names to channel ids; "default"
	// takes every item whose channel is not listed.
	Channels map[string]string
	Logger   *slog.Logger // nil discards
	// Transport carries REST requests once rewritten to APIURL (nil:
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Dialer dials the gateway (nil: gorilla's default dialer).
	Dialer *websocket.Dialer
	// MaxBody caps a signed interaction's body in bytes (default 1 MiB).
	MaxBody int64
	// Poll is how often the outbox worker looks again when idle (default 1s).
	Poll time.Duration
	// MemberEvents, in gateway mode, subscribes to the server's member
	// events (the privileged Server Members intent, which the bot must be
	// granted in the developer portal, or Discord closes the gateway): a
	// mapped member who leaves or is removed from the server is suspended
	// from approving (members.go). HTTP interactions receive no events.
	MemberEvents bool
}

// Adapter is the Discord edge. Build it with New; serve Handler (HTTP mode)
// or run RunGateway (gateway mode), and run RunOutbox in both.
type Adapter struct {
	bot       *bot.Bot
	s         *discordgo.Session
	log       *slog.Logger
	publicKey ed25519.PublicKey
	appID     string
	guildID   string
	channels  map[string]string
	maxBody   int64
	poll      time.Duration
	members   bool
}

// New checks the options and builds the Discord session. It makes no
// network call.
func New(o Options) (*Adapter, error) {
	if o.Bot == nil {
		return nil, errors.New("discord: no bot")
	}
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(o.Token), "Bot "))
	if token == "" {
		return nil, errors.New("discord: the bot token is empty")
	}
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	target, err := parseAPIURL(o.APIURL)
	if err != nil {
		return nil, err
	}
	if o.PublicKey != nil && len(o.PublicKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("discord: the public key must be %d bytes, not %d", ed25519.PublicKeySize, len(o.PublicKey))
	}
	if o.Channels["default"] == "" {
		return nil, errors.New("discord: no default channel")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
	}
	s, err := discordgo.New("Bot " + token)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	s.Client = &http.Client{Transport: &rewriteTransport{target: target, base: o.Transport}, Timeout: 15 * time.Second}
	// A 429 is returned as *discordgo.RateLimitError instead of slept on
	// inside the call (every call also passes WithRetryOnRatelimit(false)).
	s.ShouldRetryOnRateLimit = false
	s.StateEnabled = false
	// Button clicks and slash commands need no gateway intents; a member
	// leaving the server is a GUILD_MEMBER_REMOVE of the Server Members
	// intent.
	s.Identify.Intents = discordgo.IntentsNone
	if o.MemberEvents {
		s.Identify.Intents = discordgo.IntentsGuildMembers
	}
	if o.Dialer != nil {
		s.Dialer = o.Dialer
	}
	return &Adapter{
		bot: o.Bot, s: s, log: o.Logger, publicKey: o.PublicKey,
		appID: o.ApplicationID, guildID: o.GuildID, channels: o.Channels,
		maxBody: o.MaxBody, poll: o.Poll, members: o.MemberEvents,
	}, nil
}

// apiTarget is where discordgo's requests are sent instead of discord.com.
type apiTarget struct {
	scheme, host, prefix string // prefix ends with "/": "/api/v10/"
}

// parseAPIURL checks the configured API URL: absolute, ending with '/', and
// https unless it names a loopback host (a test fake).
func parseAPIURL(s string) (apiTarget, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return apiTarget{}, fmt.Errorf("discord: api_url %q is not an absolute http(s) URL such as %s", s, DefaultAPIURL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		return apiTarget{}, fmt.Errorf("discord: api_url %q must end with '/'", s)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return apiTarget{}, fmt.Errorf("discord: api_url %q must use https: the bot token is sent with every call (http is allowed only for a loopback test fake)", s)
	}
	return apiTarget{scheme: u.Scheme, host: u.Host, prefix: u.Path}, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// rewriteTransport sends discordgo's REST calls, which are built for
// https://discord.com/api/v9/, to the configured API URL, and refuses any
// other host so that the bot token can go nowhere else.
type rewriteTransport struct {
	target apiTarget
	base   http.RoundTripper
}

// apiPrefix is the path discordgo's endpoints start with.
var apiPrefix = "/api/v" + discordgo.APIVersion + "/"

func (t *rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != "discord.com" || !strings.HasPrefix(r.URL.Path, apiPrefix) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("discord: refusing a request to %s%s: only the Discord API is called", r.URL.Host, r.URL.Path)
	}
	r2 := r.Clone(r.Context())
	r2.URL.Scheme, r2.URL.Host, r2.Host = t.target.scheme, t.target.host, t.target.host
	r2.URL.Path = t.target.prefix + strings.TrimPrefix(r.URL.Path, apiPrefix)
	r2.URL.RawPath = ""
	return t.base.RoundTrip(r2)
}

// callOpts are the options of every REST call: the caller's context, and
// no sleeping on a 429 (the outbox retries after retry_after instead).
func callOpts(ctx context.Context) []discordgo.RequestOption {
	return []discordgo.RequestOption{discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false)}
}

// deliveryOpts are the options of a delivery's REST call: callOpts, and no
// retry of a 502 inside the call either. The outbox alone decides retries.
func deliveryOpts(ctx context.Context) []discordgo.RequestOption {
	return append(callOpts(ctx), discordgo.WithRestRetries(0))
}

// RunOutbox posts and edits messages from the bot's outbox until ctx ends.
func (a *Adapter) RunOutbox(ctx context.Context) error {
	return a.bot.Outbox().Serve(ctx, Sink, a.poll, a.Renderer())
}

// RunGateway connects to the Discord gateway and answers the interactions
// it dispatches until ctx ends. A failed connection is retried with
// backoff; discordgo reconnects (and resumes) a dropped one by itself.
func (a *Adapter) RunGateway(ctx context.Context) error {
	remove := a.s.AddHandler(func(_ *discordgo.Session, ic *discordgo.InteractionCreate) {
		if ic.Interaction != nil {
			a.onGateway(ctx, ic.Interaction)
		}
	})
	defer remove()
	if a.members {
		defer a.s.AddHandler(func(_ *discordgo.Session, m *discordgo.GuildMemberRemove) { a.memberLeft(ctx, m) })()
	}
	for attempt := 1; ; attempt++ {
		err := a.s.Open()
		if err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen) {
			break
		}
		wait := bot.Backoff(attempt)
		a.log.Warn("discord gateway: connection failed; will retry", "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	a.log.Info("discord gateway connected")
	<-ctx.Done()
	if err := a.s.Close(); err != nil {
		a.log.Warn("discord gateway: close", "err", err)
	}
	return ctx.Err()
}

// onGateway answers one interaction received over the gateway, through the
// REST callback, within Discord's 3 s deadline and without waiting on a
// rate limit.
func (a *Adapter) onGateway(ctx context.Context, i *discordgo.Interaction) {
	resp := a.respond(ctx, i)
	rctx, cancel := context.WithTimeout(ctx, discordgo.InteractionDeadline)
	defer cancel()
	if err := a.s.InteractionRespond(i, resp, callOpts(rctx)...); err != nil {
		// A network error quotes the callback URL, which holds the
		// interaction's token (a credential for 15 minutes): never log it.
		a.log.Warn("discord: answering an interaction failed", "interaction", i.ID, "err", withoutSecret(err, i.Token))
	}
}

// CommandName is the slash command Countersign registers.
const CommandName = "countersign"

// command is the /countersign slash command: one string option.
func command() *discordgo.ApplicationCommand {
	return &discordgo.ApplicationCommand{
		Name:        CommandName,
		Description: "Countersign: pending, show <id>, approve <id>, reject <id> <reason>, history, check, help",
		Options: []*discordgo.ApplicationCommandOption{{
			Type:        discordgo.ApplicationCommandOptionString,
			Name:        "command",
			Description: "for example: pending, or show 12",
			Required:    true,
		}},
	}
}

// RegisterCommands creates (or updates) the /countersign command: in the
// configured guild when GuildID is set (available at once), else globally.
// It retries until Discord accepts it or refuses it for good, and never
// fails the process: the command can also be registered by hand.
func (a *Adapter) RegisterCommands(ctx context.Context) error {
	if a.appID == "" {
		a.log.Warn("discord: no application_id; the /countersign command was not registered")
		return nil
	}
	for attempt := 1; ; attempt++ {
		_, err := a.s.ApplicationCommandCreate(a.appID, a.guildID, command(), callOpts(ctx)...)
		if err == nil {
			a.log.Info("discord: /countersign command registered", "guild", a.guildID)
			return nil
		}
		err = classify(err)
		var perm *bot.PermanentError
		if errors.As(err, &perm) {
			a.log.Error("discord: registering /countersign was refused; register it by hand (see docs/discord.md)", "err", err)
			return nil
		}
		wait := bot.Backoff(attempt)
		var ra *bot.RetryAfterError
		if errors.As(err, &ra) && ra.After > wait {
			wait = ra.After
		}
		a.log.Warn("discord: registering /countersign failed; will retry", "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// classify maps a REST error to the delivery contract's kinds
// (bot.Renderer): a 429 is a *bot.RetryAfterError of its retry_after; any
// 4xx but 401 (a token being fixed), 408 and 429 (a channel the bot cannot
// see, a deleted message, a payload Discord refuses) a *bot.PermanentError;
// anything else (unreachable, 5xx, 401, 408) a *bot.UnavailableError.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return &bot.RetryAfterError{After: rl.RetryAfter, Err: err}
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		c := re.Response.StatusCode
		if c >= 400 && c < 500 && c != http.StatusUnauthorized && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests {
			return &bot.PermanentError{Err: err}
		}
	}
	return &bot.UnavailableError{Err: err}
}

// withoutSecret is err's message with every occurrence of secret (and of
// its URL-escaped form) replaced by "[redacted]", for logging.
func withoutSecret(err error, secret string) string {
	msg := err.Error()
	if secret == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, secret, "[redacted]")
	return strings.ReplaceAll(msg, url.PathEscape(secret), "[redacted]")
}
