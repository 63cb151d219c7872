// Package email puts email on the escalation ladder: a reminder or an
// escalation addressed to the channel "email" (approvals.reminder_channel,
// approvals.escalation_channel) reaches, by email, the people who may
// decide the item (the escalation's role, when it names one) and have an
// address (principals[].email).
//
// A message says what is waiting, as much as email.include allows
// (summary: the title, kind, requester and expiry; none: only that an item
// awaits a decision, so that a clinical deployment keeps patient details
// out of mail), and carries a one-time link that signs the person in to
// the console on the item's page (the console's own sign-in link, minted
// by bot.WebLinks, as the console's rules allow). Nothing in it decides:
// replies are never read.
//
// Email is a surface that posts no card (bot.Notifier): its renderer's
// channel is "email", and the outbox hands it only the reminders and
// escalations addressed there. Messages are sent over SMTP with
// github.com/wneessen/go-mail, with text and HTML parts.
package email

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	gomail "github.com/wneessen/go-mail"
)

// Sink is the outbox sink name of email.
const Sink = "email"

// Channel is the name an escalation or a reminder step uses for email.
const Channel = "email"

// What a message may say (email.include).
const (
	IncludeSummary = "summary" // the item's title, kind, requester and expiry
	IncludeNone    = "none"    // only that an item awaits a decision
)

// Person is someone an email may reach: a configured principal and the
// address it is reached at.
type Person struct {
	bot.Principal
	Address string
}

// SMTP is the server messages are sent through.
type SMTP struct {
	Host string
	Port int
	// StartTLS requires the connection to be upgraded with STARTTLS
	// before anything is sent (true by default in the config); false
	// sends in the clear, for a relay on the same host.
	StartTLS bool
	Username string // "" sends without authenticating
	Password string
	// TLSConfig is the client's TLS configuration (nil: the system's
	// roots, ServerName Host). Tests pass one that trusts their server.
	TLSConfig *tls.Config
	// Timeout bounds one connection (default 15 s).
	Timeout time.Duration
}

// Options configure an Adapter.
type Options struct {
	Bot     *bot.Bot
	From    string // the sender address, "Countersign <countersign@hospital.example>"
	Include string // IncludeSummary or IncludeNone
	SMTP    SMTP
	People  []Person
	// LinkTTL is how long the console link of a message lasts (what the
	// console's item links are minted with), for the message to say.
	LinkTTL time.Duration
	// Poll is how often the outbox is looked at when idle (default 2 s).
	Poll   time.Duration
	Logger *slog.Logger
}

// Adapter sends Countersign's emails.
type Adapter struct {
	bot     *bot.Bot
	from    string
	include string
	smtp    SMTP
	people  []Person
	linkTTL time.Duration
	poll    time.Duration
	log     *slog.Logger
	domain  string

	mu sync.Mutex // one SMTP session at a time
}

// New checks the options and returns an adapter. It does no network I/O.
func New(o Options) (*Adapter, error) {
	var problems []string
	if o.Bot == nil {
		problems = append(problems, "no bot")
	}
	from, err := mail.ParseAddress(o.From)
	if err != nil {
		problems = append(problems, fmt.Sprintf("the sender %q is not an address (%v)", o.From, err))
	}
	switch o.Include {
	case IncludeSummary, IncludeNone:
	default:
		problems = append(problems, fmt.Sprintf("include %q: use %s or %s", o.Include, IncludeSummary, IncludeNone))
	}
	if strings.TrimSpace(o.SMTP.Host) == "" {
		problems = append(problems, "no SMTP host")
	}
	if o.SMTP.Port <= 0 || o.SMTP.Port > 65535 {
		problems = append(problems, fmt.Sprintf("SMTP port %d is not a port", o.SMTP.Port))
	}
	if (o.SMTP.Username == "") != (o.SMTP.Password == "") {
		problems = append(problems, "an SMTP username needs its password, and a password its username")
	}
	for _, p := range o.People {
		if _, err := mail.ParseAddress(p.Address); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q is not an email address", p.Name, p.Address))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("email: " + strings.Join(problems, "; "))
	}
	if o.SMTP.Timeout <= 0 {
		o.SMTP.Timeout = 15 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	domain := "countersign.invalid"
	if at := strings.LastIndexByte(from.Address, '@'); at >= 0 {
		domain = from.Address[at+1:]
	}
	return &Adapter{bot: o.Bot, from: from.String(), include: o.Include, smtp: o.SMTP, people: o.People, linkTTL: o.LinkTTL, poll: o.Poll, log: o.Logger.With("surface", Sink), domain: domain}, nil
}

// Run drains the outbox to email until ctx ends.
func (a *Adapter) Run(ctx context.Context) error {
	err := a.bot.Outbox().Serve(ctx, Sink, a.poll, a.Renderer())
	if errors.Is(err, context.Canceled) {
		return ctx.Err()
	}
	return err
}

// Renderer returns email's half of the delivery contract: a bot.Renderer
// whose only channel is "email" and that posts no card, and a
// bot.Notifier that sends the emails of a reminder or an escalation.
func (a *Adapter) Renderer() bot.Renderer { return renderer{a} }

type renderer struct{ a *Adapter }

var errNoCard = &bot.PermanentError{Err: errors.New("email posts no card")}

func (r renderer) Channel(name string) string {
	if name == Channel {
		return Channel
	}
	return ""
}

func (renderer) Post(context.Context, string, bot.Item, string) (bot.MessageRef, error) {
	return bot.MessageRef{}, errNoCard
}
func (renderer) Update(context.Context, bot.MessageRef, bot.Item) error          { return errNoCard }
func (renderer) Reply(context.Context, bot.MessageRef, bot.Item, bot.Note) error { return errNoCard }

// Notify emails each person who may decide the item (of n.Role, when the
// escalation names one) and has an address.
func (r renderer) Notify(ctx context.Context, _ string, it bot.Item, n bot.Note) error {
	return r.a.notify(ctx, it, n)
}

// recipients are the people the note reaches: the one rule lets them
// decide the item (role, scope, not its requester), and they hold the
// escalation's role when it names one.
func (a *Adapter) recipients(it bot.Item, role string) []Person {
	var out []Person
	for _, p := range a.people {
		if role != "" && !strings.EqualFold(string(p.Role), role) {
			continue
		}
		c := &bot.Caller{Principal: p.Principal, Surface: Sink}
		if _, readOnly := a.bot.Items().ReadOnly(c, it); readOnly {
			continue
		}
		out = append(out, p)
	}
	return out
}

func (a *Adapter) notify(ctx context.Context, it bot.Item, n bot.Note) error {
	to := onCallOnly(a.recipients(it, n.Role), n, a.log)
	if n.Type == bot.EventDirect {
		// A stage's notify: the one person named, when they may decide it.
		to = slices.DeleteFunc(a.recipients(it, ""), func(p Person) bool { return !strings.EqualFold(p.Name, n.Person) })
		if len(to) == 0 {
			a.log.Info("stage notify: not emailed (no principals[].email, or they may not decide the item)", "item", it.ID, "person", n.Person)
			return nil
		}
	}
	if len(to) == 0 {
		a.log.Warn("nobody to email: no one with principals[].email may decide the item", "item", it.ID, "type", n.Type, "role", n.Role)
		return nil
	}
	var msgs []*gomail.Msg
	for _, p := range to {
		m, err := a.message(it, n, p)
		if err != nil {
			return fmt.Errorf("email: item %d to %s: %w", it.ID, p.Name, err)
		}
		msgs = append(msgs, m)
	}
	if err := a.send(ctx, msgs); err != nil {
		return err
	}
	a.log.InfoContext(ctx, "emailed", "item", it.ID, "type", n.Type, "recipients", len(msgs))
	return nil
}

// content is what one message says.
type content struct {
	Subject string
	Lead    string   // the first sentence
	Lines   []string // what is waiting (summary only)
	Link    string   // the one-time console link, "" when there is none
	Until   string   // until when the link works
	NoLink  string   // why there is no link
}

// compose writes the message for person p.
func (a *Adapter) compose(it bot.Item, n bot.Note, p Person) content {
	var c content
	what := "awaits your decision"
	prefix := ""
	switch n.Type {
	case bot.EventEscalated:
		prefix, what = "Escalated: ", "still awaits a decision"
	case bot.EventReminder:
		prefix, what = "Reminder: ", "still awaits your decision"
	}
	if a.include == IncludeNone {
		c.Subject = fmt.Sprintf("%sCountersign item #%d %s", prefix, it.ID, what)
		c.Lead = fmt.Sprintf("A Countersign item (#%d) %s. What it is about is shown only in the console.", it.ID, what)
	} else {
		title := bot.OneLine(it.Title, 200)
		if it.Sensitive || title == "" {
			title = chat.SensitiveNoun(it.Kind)
			if !it.Sensitive {
				title = chat.KindNoun(it.Kind)
			}
		}
		c.Subject = fmt.Sprintf("%s#%d %s: %s", prefix, it.ID, what, title)
		c.Lead = fmt.Sprintf("#%d %s: %s", it.ID, what, title)
		c.Lines = append(c.Lines, "Kind: "+chat.KindNoun(it.Kind))
		if it.Requester != "" {
			c.Lines = append(c.Lines, "Requested by: "+bot.OneLine(it.Requester, 200))
		}
		if !it.CreatedAt.IsZero() {
			c.Lines = append(c.Lines, "Asked: "+chat.Stamp(it.CreatedAt))
		}
		if !it.ExpiresAt.IsZero() {
			c.Lines = append(c.Lines, "Expires: "+chat.Stamp(it.ExpiresAt))
		}
		if it.Tally != "" {
			c.Lines = append(c.Lines, "Votes: "+bot.OneLine(it.Tally, 300))
		}
		if n.Text != "" {
			c.Lines = append(c.Lines, bot.OneLine(n.Text, 300))
		}
		if l := n.OnCallLine(); l != "" {
			c.Lines = append(c.Lines, bot.OneLine(l, 300))
		}
	}
	caller := &bot.Caller{Principal: p.Principal, Surface: Sink}
	link, err := a.bot.WebLinks().ItemSignIn(caller, it.ID)
	switch {
	case err == nil:
		c.Link = link
	case errors.Is(err, bot.ErrNoWebConsole):
		c.NoLink = "The web console is off here, so this email carries no link: decide on the item's card in chat, or ask an admin."
	default:
		a.log.Warn("no console link for an email", "item", it.ID, "to", p.Name, "err", err)
		c.NoLink = "Countersign could not make you a console link (" + bot.OneLine(err.Error(), 200) + "): decide on the item's card in chat, or ask an admin."
	}
	return c
}

// footer is the last paragraph of every message.
const footer = "This email decides nothing, and replies to it are not read: decide in the console or on the item's card in chat."

var htmlBody = template.Must(template.New("email").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Subject}}</title></head>
<body style="font-family:sans-serif;line-height:1.4">
<p><strong>{{.Lead}}</strong></p>
{{if .Lines}}<ul>{{range .Lines}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Link}}<p><a href="{{.Link}}">Open it in the console</a>: the link signs you in once, for you only, until {{.Until}}.</p>
{{else}}<p>{{.NoLink}}</p>{{end}}
<p style="color:#555">` + footer + `</p>
</body></html>
`))

func (c content) text() string {
	var b strings.Builder
	b.WriteString(c.Lead + "\n\n")
	for _, l := range c.Lines {
		b.WriteString(l + "\n")
	}
	if len(c.Lines) > 0 {
		b.WriteString("\n")
	}
	if c.Link != "" {
		b.WriteString("Open it in the console (the link signs you in once, for you only, until " + c.Until + "):\n" + c.Link + "\n\n")
	} else {
		b.WriteString(c.NoLink + "\n\n")
	}
	b.WriteString(footer + "\n")
	return b.String()
}

// message builds the email for person p.
func (a *Adapter) message(it bot.Item, n bot.Note, p Person) (*gomail.Msg, error) {
	c := a.compose(it, n, p)
	c.Until = "it is used"
	if a.linkTTL > 0 {
		c.Until = chat.Stamp(a.bot.Now().Add(a.linkTTL))
	}
	m := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := m.From(a.from); err != nil {
		return nil, err
	}
	if err := m.AddToFormat(p.Name, p.Address); err != nil {
		return nil, err
	}
	m.Subject(c.Subject)
	m.SetDateWithValue(a.bot.Now())
	// The same message on every retry of the same step carries the same
	// Message-ID, so that a mail client shows a resent one once.
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d|%s|%s", it.ID, n.Key, p.Address)))
	m.SetMessageIDWithValue(hex.EncodeToString(sum[:12]) + "@" + a.domain)
	m.SetGenHeader("Auto-Submitted", "auto-generated")
	m.SetBulk()
	m.SetBodyString(gomail.TypeTextPlain, c.text())
	var h strings.Builder
	if err := htmlBody.Execute(&h, c); err != nil {
		return nil, err
	}
	m.AddAlternativeString(gomail.TypeTextHTML, h.String())
	return m, nil
}

// send delivers msgs in one SMTP session. A failure is what it means for
// the outbox: the server unreachable, refusing the credentials or failing
// for now (4xx) is *bot.UnavailableError; a refusal of the messages
// themselves for good (5xx on a recipient or the data) a
// *bot.PermanentError.
func (a *Adapter) send(ctx context.Context, msgs []*gomail.Msg) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	opts := []gomail.Option{gomail.WithPort(a.smtp.Port), gomail.WithTimeout(a.smtp.Timeout), gomail.WithHELO(a.domain)}
	if a.smtp.StartTLS {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	tc := a.smtp.TLSConfig
	if tc == nil {
		tc = &tls.Config{ServerName: a.smtp.Host, MinVersion: tls.VersionTLS12}
	}
	opts = append(opts, gomail.WithTLSConfig(tc))
	if a.smtp.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover), gomail.WithUsername(a.smtp.Username), gomail.WithPassword(a.smtp.Password))
	}
	cl, err := gomail.NewClient(a.smtp.Host, opts...)
	if err != nil {
		return &bot.PermanentError{Err: fmt.Errorf("email: %w", err)}
	}
	if err := cl.DialAndSendWithContext(ctx, msgs...); err != nil {
		return sendError(err)
	}
	return nil
}

// sendError classifies a failed SMTP session.
func sendError(err error) error {
	wrapped := fmt.Errorf("email: %w", err)
	var se *gomail.SendError
	if errors.As(err, &se) {
		if se.IsTemp() {
			return &bot.UnavailableError{Err: wrapped}
		}
		if code := se.ErrorCode(); code >= 500 && code < 600 {
			return &bot.PermanentError{Err: wrapped}
		}
	}
	return &bot.UnavailableError{Err: wrapped}
}
