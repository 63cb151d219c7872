package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream declares one upstream MCP server: a stdio server Countersign
// starts (Command) or a streamable-HTTP one (URL).
type Upstream struct {
	Name string
	// Command, Args, Env and Dir start a stdio server. Env is its whole
	// environment (NAME=value): it inherits nothing of Countersign's.
	Command string
	Args    []string
	Env     []string
	Dir     string
	// URL is a streamable-HTTP server's endpoint; Header is sent with
	// every request to it.
	URL    string
	Header http.Header
	// Rules classify its tools, first match wins; Default is the category
	// of a tool no rule matches ("" is unclassified: a confirmation).
	Rules   []Rule
	Default string
	// Principals, when set, are the only principals (by name) whose calls
	// of its tools are taken; empty: any caller the call path allows.
	Principals []string
}

// Category is the configured category of tool: its rule's, else the
// upstream's default.
func (u Upstream) Category(tool string) string {
	if i := Classify(u.Rules, tool); i >= 0 {
		return u.Rules[i].Category
	}
	return u.Default
}

// DryRunOf is the dry-run companion of tool: its rule's, or nil.
func (u Upstream) DryRunOf(tool string) *DryRun {
	if i := Classify(u.Rules, tool); i >= 0 {
		return u.Rules[i].DryRun
	}
	return nil
}

// secrets are the values that must never reach a log line: the
// environment and header values configuration handed the upstream.
func (u Upstream) secrets() []string {
	var out []string
	for _, kv := range u.Env {
		if _, v, ok := strings.Cut(kv, "="); ok && len(v) >= 4 {
			out = append(out, v)
		}
	}
	for _, vs := range u.Header {
		for _, v := range vs {
			if len(v) >= 4 {
				out = append(out, v)
			}
		}
	}
	return out
}

// Options configure New. Zero values take the documented defaults.
type Options struct {
	Upstreams []Upstream
	Logger    *slog.Logger
	// Version is the client version Countersign announces to upstreams.
	Version string
	// Reserved reports a name the gateway must not serve (one of
	// Countersign's own tools): a collision stops Connect, and a tool
	// listed later under such a name is not served.
	Reserved func(name string) bool
	// CallTimeout bounds one forwarded call (default 60s);
	// MaxResultBytes bounds its answer, as JSON (default 1 MiB).
	CallTimeout    time.Duration
	MaxResultBytes int
	// ConnectTimeout bounds starting and listing an upstream (default 30s).
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before restarting an
	// upstream that exited or could not start (default 1s and 1m): it
	// doubles after each failure, and starts over once an upstream ran
	// for MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Now and Sleep are the clock (nil: time.Now, and a timer that ends
	// early with ctx).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Tool is one upstream tool as the gateway serves it.
type Tool struct {
	Name         string // the served name, <upstream>__<tool>
	Upstream     string
	UpstreamTool string
	// Category is the configured category ("" unclassified).
	Category string
	// Description, InputSchema and Annotations are what the upstream
	// said: its claims.
	Description string
	InputSchema map[string]any
	Annotations *sdk.ToolAnnotations
	// DryRun is the configured dry-run companion, or nil.
	DryRun *DryRun
}

// Gateway holds the upstream connections.
type Gateway struct {
	o      Options
	ups    []*upstream
	byName map[string]*upstream

	mu      sync.Mutex
	subs    map[int]func()
	nextSub int
}

// upstream is one upstream's connection and what it last listed.
type upstream struct {
	g    *Gateway
	spec Upstream
	log  *slog.Logger

	mu      sync.Mutex
	session *sdk.ClientSession
	tools   []Tool          // as last listed; kept while it is down
	index   map[string]Tool // tools by served name
	down    string          // why it is down; "" while it is up
	proc    *exec.Cmd       // the stdio server last started
	closed  bool            // Close was called: never started again
}

// maxTools bounds what one upstream may list.
const maxTools = 512

// New returns a gateway over o.Upstreams, not yet connected.
func New(o Options) (*Gateway, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Reserved == nil {
		o.Reserved = func(string) bool { return false }
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = time.Minute
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 1 << 20
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(time.Minute, o.MinBackoff)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	g := &Gateway{o: o, byName: map[string]*upstream{}, subs: map[int]func(){}}
	var errs []error
	for i, u := range o.Upstreams {
		if err := CheckName(u.Name); err != nil {
			errs = append(errs, fmt.Errorf("gateway.upstreams[%d].name: %w", i, err))
			continue
		}
		if _, dup := g.byName[u.Name]; dup {
			errs = append(errs, fmt.Errorf("gateway.upstreams[%d].name: %q is declared twice", i, u.Name))
			continue
		}
		if (u.Command == "") == (u.URL == "") {
			errs = append(errs, fmt.Errorf("gateway.upstreams[%d]: give either command (a stdio server) or url (a streamable-HTTP server)", i))
			continue
		}
		up := &upstream{g: g, spec: u, log: o.Logger.With("upstream", u.Name), down: "not started yet"}
		g.ups = append(g.ups, up)
		g.byName[u.Name] = up
	}
	return g, errors.Join(errs...)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Connect starts every upstream and lists its tools, once. An upstream
// that does not start is reported down (Down), and Run keeps trying it; a
// listed tool whose served name is one of Countersign's own is an error.
func (g *Gateway) Connect(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(g.ups))
	for i, u := range g.ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := u.connect(ctx); err != nil {
				var c *collisionError
				if errors.As(err, &c) {
					errs[i] = err
				}
				u.setDown(err.Error())
				u.log.Error("upstream did not start; retrying with backoff", "err", err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Run keeps every upstream running until ctx ends: one that exits (or
// never started) is restarted with backoff. It closes them when ctx ends.
func (g *Gateway) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, u := range g.ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u.supervise(ctx)
		}()
	}
	wg.Wait()
	return nil
}

// Tools is every upstream tool served now, sorted by name.
func (g *Gateway) Tools() []Tool {
	var out []Tool
	for _, u := range g.ups {
		u.mu.Lock()
		out = append(out, u.tools...)
		u.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Tool is the served tool name, if it is served now.
func (g *Gateway) Tool(name string) (Tool, bool) {
	up, _, ok := Split(name)
	if !ok {
		return Tool{}, false
	}
	u := g.byName[up]
	if u == nil {
		return Tool{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.index[name]
	return t, ok
}

// Category is the configured category of a served name ("" for a tool no
// rule or default classifies, and for a name that is not an upstream's:
// a confirmation either way). ok is false for a name of no configured
// upstream.
func (g *Gateway) Category(name string) (category string, ok bool) {
	up, tool, ok := Split(name)
	if !ok || g.byName[up] == nil {
		return "", false
	}
	return g.byName[up].spec.Category(tool), true
}

// MayCall reports whether principal may call the tools of upstream (its
// Principals list, when it has one).
func (g *Gateway) MayCall(upstream, principal string) bool {
	u := g.byName[upstream]
	if u == nil {
		return false
	}
	if len(u.spec.Principals) == 0 {
		return true
	}
	for _, p := range u.spec.Principals {
		if p == principal {
			return true
		}
	}
	return false
}

// Down names each upstream that is down now with why, sorted.
func (g *Gateway) Down() []string {
	var out []string
	for _, u := range g.ups {
		u.mu.Lock()
		if u.down != "" {
			out = append(out, u.spec.Name+": "+u.down)
		}
		u.mu.Unlock()
	}
	return out
}

// DownNames names each upstream that is down now, sorted (for /readyz:
// names only, the reasons are in Down and the logs).
func (g *Gateway) DownNames() []string {
	var out []string
	for _, u := range g.ups {
		u.mu.Lock()
		if u.down != "" {
			out = append(out, u.spec.Name)
		}
		u.mu.Unlock()
	}
	sort.Strings(out)
	return out
}

// Subscribe calls fn (on a goroutine of the gateway) whenever the tools
// served change: an upstream listed new tools, or came back. It returns
// the function that stops it.
func (g *Gateway) Subscribe(fn func()) (cancel func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := g.nextSub
	g.nextSub++
	g.subs[id] = fn
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.subs, id)
	}
}

func (g *Gateway) changed() {
	g.mu.Lock()
	fns := make([]func(), 0, len(g.subs))
	for _, fn := range g.subs {
		fns = append(fns, fn)
	}
	g.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// CallTimeout is the bound of one forwarded call.
func (g *Gateway) CallTimeout() time.Duration { return g.o.CallTimeout }

// DownError is a call to an upstream that is down.
type DownError struct {
	Upstream, Tool, Why string
}

func (e *DownError) Error() string {
	return fmt.Sprintf("upstream %s is down (%s): %s was not called. Countersign restarts it with backoff; retry later", e.Upstream, e.Why, e.Tool)
}

// Answer is an upstream's answer to a forwarded call: the result, and
// its JSON encoding (what the size limit bounds and the audit's SHA-256
// is of), made once.
type Answer struct {
	Result *sdk.CallToolResult
	JSON   []byte
}

// Forward calls the served tool name at its upstream with exactly args
// (a JSON object), once, and returns the upstream's result (Call without
// its encoding).
func (g *Gateway) Forward(ctx context.Context, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	a, err := g.Call(ctx, name, args)
	return a.Result, err
}

// Call calls the served tool name at its upstream with exactly args (a
// JSON object), once, and returns the upstream's answer. An upstream that
// is down, times out, fails or answers more than MaxResultBytes is an
// error: the call is never retried here.
func (g *Gateway) Call(ctx context.Context, name string, args json.RawMessage) (Answer, error) {
	up, tool, ok := Split(name)
	u := g.byName[up]
	if !ok || u == nil {
		return Answer{}, fmt.Errorf("%s is not a tool of a configured upstream", name)
	}
	u.mu.Lock()
	session, why := u.session, u.down
	_, listed := u.index[name]
	u.mu.Unlock()
	if session == nil {
		return Answer{}, &DownError{Upstream: up, Tool: name, Why: why}
	}
	if !listed {
		return Answer{}, fmt.Errorf("upstream %s does not offer %s (its tools: tools/list)", up, tool)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.CallTimeout)
	defer cancel()
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Answer{}, fmt.Errorf("upstream %s did not answer %s within %s; whether it ran is unknown", up, tool, g.o.CallTimeout)
	case err != nil:
		return Answer{}, fmt.Errorf("upstream %s failed on %s: %s", up, tool, Clip(err.Error(), 500))
	case res == nil:
		return Answer{}, fmt.Errorf("upstream %s answered %s with nothing", up, tool)
	}
	b, err := json.Marshal(res)
	if err != nil || len(b) > g.o.MaxResultBytes {
		return Answer{}, fmt.Errorf("upstream %s answered %s with %d bytes, over the gateway's limit of %d: the answer is dropped", up, tool, len(b), g.o.MaxResultBytes)
	}
	return Answer{Result: res, JSON: b}, nil
}

// collisionError is an upstream tool served under a reserved name.
type collisionError struct{ name, upstream string }

func (e *collisionError) Error() string {
	return fmt.Sprintf("upstream %s lists a tool served as %s, which is a Countersign tool: rename the upstream (gateway.upstreams[].name)", e.upstream, e.name)
}

func (u *upstream) setDown(why string) {
	u.mu.Lock()
	u.down = Clip(why, 300)
	u.mu.Unlock()
}

// connect starts the upstream, lists its tools and makes them current.
func (u *upstream) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, u.g.o.ConnectTimeout)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "countersign-gateway", Version: u.g.o.Version}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			go u.relist(ctx)
		},
	})
	session, err := client.Connect(cctx, u.transport(ctx), nil)
	if err != nil {
		return fmt.Errorf("connecting: %s", Clip(err.Error(), 300))
	}
	tools, err := u.list(cctx, session)
	if err != nil {
		session.Close()
		return err
	}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		session.Close()
		return errors.New("the gateway is closed")
	}
	u.session, u.down = session, ""
	u.setTools(tools)
	u.mu.Unlock()
	u.log.Info("upstream connected", "tools", len(tools))
	u.g.changed()
	return nil
}

// transport is how to reach the upstream: a process started with only
// its declared environment, its stderr logged line by line without the
// configured secrets; or streamable HTTP with the configured header.
func (u *upstream) transport(ctx context.Context) sdk.Transport {
	s := u.spec
	if s.URL != "" {
		return &sdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &http.Client{Transport: headerTransport{s.Header}}}
	}
	cmd := exec.CommandContext(ctx, s.Command, s.Args...)
	cmd.Env = s.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = s.Dir
	cmd.Stderr = &lineLogger{log: u.log, secrets: s.secrets()}
	u.mu.Lock()
	u.proc = cmd
	u.mu.Unlock()
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// headerTransport adds the configured header to every request.
type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return http.DefaultTransport.RoundTrip(r)
}

// list reads the upstream's tools: each one whose served name a host
// accepts and whose input schema is an object schema, at most maxTools.
func (u *upstream) list(ctx context.Context, session *sdk.ClientSession) ([]Tool, error) {
	var out []Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing its tools: %s", Clip(err.Error(), 300))
		}
		if len(out) == maxTools {
			u.log.Warn("upstream lists more tools than the gateway serves; the rest are not served", "max", maxTools)
			break
		}
		name := Name(u.spec.Name, t.Name)
		if !toolName.MatchString(name) {
			u.log.Warn("upstream tool not served: its name as served would not be [A-Za-z0-9_-]{1,64}", "tool", Clip(t.Name, 80))
			continue
		}
		if u.g.o.Reserved(name) {
			return nil, &collisionError{name: name, upstream: u.spec.Name}
		}
		schema, ok := t.InputSchema.(map[string]any)
		if !ok || schema["type"] != "object" {
			u.log.Warn("upstream tool not served: its input schema is not an object schema", "tool", t.Name)
			continue
		}
		out = append(out, Tool{
			Name: name, Upstream: u.spec.Name, UpstreamTool: t.Name, Category: u.spec.Category(t.Name), DryRun: u.spec.DryRunOf(t.Name),
			Description: t.Description, InputSchema: schema, Annotations: t.Annotations,
		})
	}
	return out, nil
}

// setTools makes tools current; u.mu is held.
func (u *upstream) setTools(tools []Tool) {
	u.tools = tools
	u.index = make(map[string]Tool, len(tools))
	for _, t := range tools {
		u.index[t.Name] = t
	}
}

// relist reads the tools again after the upstream said they changed.
func (u *upstream) relist(ctx context.Context) {
	u.mu.Lock()
	session := u.session
	u.mu.Unlock()
	if session == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, u.g.o.ConnectTimeout)
	defer cancel()
	tools, err := u.list(lctx, session)
	if err != nil {
		u.log.Error("re-listing the upstream's tools failed; serving the previous list", "err", err)
		return
	}
	u.mu.Lock()
	if u.session == session {
		u.setTools(tools)
	}
	u.mu.Unlock()
	u.log.Info("upstream tools re-listed", "tools", len(tools))
	u.g.changed()
}

// supervise restarts the upstream whenever it is not running, with
// backoff, until ctx ends.
func (u *upstream) supervise(ctx context.Context) {
	o := u.g.o
	backoff := o.MinBackoff
	for {
		u.mu.Lock()
		session, closed := u.session, u.closed
		u.mu.Unlock()
		if closed {
			return
		}
		if session == nil {
			if err := o.Sleep(ctx, backoff); err != nil {
				return
			}
			backoff = min(backoff*2, o.MaxBackoff)
			if err := u.connect(ctx); err != nil {
				u.setDown(err.Error())
				u.log.Error("upstream did not start; retrying with backoff", "err", err, "next_in", backoff)
				continue
			}
			u.mu.Lock()
			session = u.session
			u.mu.Unlock()
			if session == nil {
				continue // closed meanwhile
			}
		}
		started := o.Now()
		done := make(chan error, 1)
		go func() { done <- session.Wait() }()
		select {
		case <-ctx.Done():
			session.Close()
			<-done
			return
		case err := <-done:
			why := "it exited"
			if err != nil {
				why = "it exited: " + err.Error()
			}
			u.mu.Lock()
			if u.session == session {
				u.session, u.down = nil, Clip(why, 300)
			}
			u.mu.Unlock()
			if o.Now().Sub(started) >= o.MaxBackoff {
				backoff = o.MinBackoff
			}
			u.log.Error("upstream stopped; restarting with backoff", "why", why, "next_in", backoff)
		}
	}
}

// lineLogger logs an upstream's stderr, a line at a time, with the
// configured secrets replaced.
type lineLogger struct {
	log     *slog.Logger
	secrets []string
	mu      sync.Mutex
	buf     []byte
}

// maxLine bounds a logged stderr line.
const maxLine = 2048

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) emit(b []byte) {
	line := Clip(string(b), maxLine)
	for _, s := range l.secrets {
		line = strings.ReplaceAll(line, s, "[redacted]")
	}
	if strings.TrimSpace(line) != "" {
		l.log.Info("upstream stderr", "line", line)
	}
}

// Clip is s as one line of printable text, at most n bytes (cut on a
// rune, marked with …): what an upstream said, fit to show.
func Clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return ' '
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Close closes every upstream session (a stdio server is stopped).
func (g *Gateway) Close() error {
	for _, u := range g.ups {
		u.mu.Lock()
		s := u.session
		u.session, u.closed = nil, true
		if u.down == "" {
			u.down = "closed"
		}
		u.mu.Unlock()
		if s != nil {
			_ = s.Close()
		}
	}
	return nil
}
