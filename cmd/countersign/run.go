package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/countersign/countersign/adapters/logwriter"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/policy"
)

// usage is the program's help; the audit and store lines are those
// subcommands' own (auditCommands, storeCommands), so the two never differ.
const usage = `countersign — a chat-ops approval bot for AI agents

Usage:
  countersign init [--config FILE]
  countersign serve [--config FILE] [--listen ADDR] [--new-signing-key]
  countersign ready [--config FILE] [--url URL] [--timeout 30s]
  countersign call [--config FILE] [--url URL] [--key KEY] [--json | --field NAME] TOOL [JSON_ARGS]
  countersign keys create [--config FILE] --name NAME --role ROLE [--scopes a,b] [--kind agent|person|service]
  countersign keys rotate-callback-secret [--config FILE] --name NAME
  countersign mcp [--config FILE] [--key KEY | --local-agent]
  countersign hook claude-code [--config FILE] [--key KEY] [--url URL] [--pubkey HEX]
` + auditCommands + "\n" + storeCommands + `
  countersign web link [--config FILE] (--name NAME | --key KEY [--name NAME] [--url URL])
  countersign version [--short]

Every command reads --config FILE, else ./config.yaml when it exists, else
the embedded default (the file is read on its own, not merged with the
default). init writes the default to ./config.yaml as a starting point.
serve listens on --listen, else $COUNTERSIGN_LISTEN, else the config's listen.
ready waits until a running server answers /readyz; call calls one tool on
it with --key or $COUNTERSIGN_API_KEY and prints the answer's text (the HTTP
status first when it is not 200).
mcp serves MCP over stdin/stdout for a local agent (logs on stderr) as the
principal of --key or $COUNTERSIGN_API_KEY; without a key it refuses to
start unless --local-agent names the keyless local agent (never approves or
administers; refused with auth_required: true).
hook claude-code is a Claude Code command hook (PreToolUse, PermissionRequest,
PostToolUse): it reads the event on stdin, asks the running server with --key
or $COUNTERSIGN_KEY, allows only on a receipt that verifies against the pinned
key (--pubkey, $COUNTERSIGN_PUBLIC_KEY, hooks.claude_code.public_key) and
prints the decision JSON; on any problem it asks the person at the terminal.
It reads --config or $COUNTERSIGN_CONFIG, never ./config.yaml
(docs/integrations.md).
audit verify exits non-zero when the chain is broken; audit export writes
the chain as JSON Lines. store compact rewrites the store without its free
pages and prints the size before and after. store backup takes a
consistent copy from the running server with an admin key (--key or
$COUNTERSIGN_API_KEY), checks it and writes it to FILE; store restore makes
a checked backup the store of a config. mcp, keys, audit and the other
store commands need the server stopped.
web link prints a one-time sign-in URL (5 minutes, single use) to the web
console for a principal under principals: (or a stored person principal);
with --key or $COUNTERSIGN_API_KEY it asks the running server instead (your
own link, or with an admin key anyone's).
`

// run is the whole program; main only calls it. Tests call it with their own
// arguments, environment and streams.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	err := dispatch(ctx, args, getenv, stdin, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // --help: the usage is printed, and asking for it is no failure
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	switch args[0] {
	case "init":
		return cmdInit(args[1:], stdout, stderr)
	case "serve":
		return cmdServe(ctx, args[1:], getenv, stderr)
	case "ready":
		return cmdReady(ctx, args[1:], getenv, stdout, stderr)
	case "call":
		return cmdCall(ctx, args[1:], getenv, stdout, stderr)
	case "keys":
		if len(args) >= 2 && args[1] == "rotate-callback-secret" {
			return cmdKeysRotateCallbackSecret(ctx, args[2:], getenv, stdout, stderr)
		}
		if len(args) < 2 || args[1] != "create" {
			fmt.Fprint(stderr, usage)
			return errors.New("usage: countersign keys create --name NAME --role ROLE")
		}
		return cmdKeysCreate(ctx, args[2:], getenv, stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "hook":
		return cmdHook(ctx, args[1:], getenv, stdin, stdout, stderr) // hook.go
	case "audit":
		return cmdAudit(ctx, args[1:], getenv, stdout, stderr)
	case "store":
		return cmdStore(ctx, args[1:], getenv, stdout, stderr)
	case "web":
		if len(args) < 2 || args[1] != "link" {
			fmt.Fprint(stderr, usage)
			return errors.New("usage: countersign web link (--name NAME | --key KEY [--name NAME])")
		}
		return cmdWebLink(ctx, args[2:], getenv, stdout, stderr)
	case "version", "--version":
		return cmdVersion(args[1:], stdout, stderr) // version_cmd.go
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// configFlag adds --config to fs and returns a loader that applies the
// default: ./config.yaml if present, else the embedded default.
func configFlag(fs *flag.FlagSet) func() (*config.Config, error) {
	path := fs.String("config", "", "the config file (default ./config.yaml, else the embedded default)")
	return func() (*config.Config, error) {
		p := *path
		if p == "" && fileExists("config.yaml") {
			p = "config.yaml"
		}
		return config.Load(p)
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args and refuses arguments left over: a command that
// takes only flags must not silently ignore a word it was given.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q (it takes only flags; see %s --help)", fs.Name(), fs.Arg(0), "countersign "+fs.Name())
	}
	return nil
}

func cmdServe(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	load := configFlag(fs)
	listen := fs.String("listen", "", "the address to listen on, host:port (default $"+config.ListenEnv+", else the config's listen)")
	newKey := fs.Bool("new-signing-key", false, "the audit signing key is lost: create a new one and record the rotation in the chain (docs/audit.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	cfg.Audit.NewSigningKey = *newKey
	if err := cfg.OverrideListen(*listen, getenv(config.ListenEnv)); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	gogc := "GOGC"
	if getenv("GOGC") == "" {
		// The live heap is a few MiB (the store is mapped, not loaded), so
		// a lazier collector costs little memory and measurably cuts the
		// CPU of every call (BENCHMARKS.md). GOGC in the environment wins.
		// The soft memory limit below bounds what the lazier collector
		// may let the heap grow to.
		debug.SetGCPercent(400)
		gogc = "default 400"
	}
	// Lines are batched (one write for many under load); warnings and
	// errors are written before their call returns; everything is written
	// before serve returns.
	logw := logwriter.New(stderr)
	defer logw.Close()
	logger := slog.New(logwriter.Flushing(cfg.Log.Handler(logw), logw))
	logStartup(logger, cfg)
	// A soft memory limit: near it the collector runs whatever GOGC says
	// and returns freed memory to the system, so a burst of large calls
	// cannot leave the process gigabytes large (docs/operations.md).
	memLimit, memFrom := applyMemoryLimit(cfg.Limits, getenv)
	logger.Info("memory limit", "bytes", memLimit, "from", memFrom, "gogc", gogc)
	a, err := buildApp(ctx, cfg, getenv, logger)
	if err != nil {
		return err
	}
	defer a.close()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	// The run's audit of read verdicts: it records unclean_restart if the
	// last run did not stop cleanly, and (queued mode) starts the appender.
	readAudit, err := a.bot.StartReadAudit(ctx, a.readAuditOptions())
	if err != nil {
		ln.Close()
		return err
	}
	a.setRun(readAudit.Run()) // the owner of the gateway's forwarding markers
	srv := &http.Server{
		Handler:           a.handler(),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("listening", "addr", ln.Addr().String(), "store", cfg.Store.Path, "tools", len(a.bot.Tools()))
	if cfg.Web.Served() {
		logger.Info("web console", "url", cfg.ConsoleURL(ln.Addr().String()), "sign_in", "countersign web link --name NAME")
	}

	var wg sync.WaitGroup
	errc := make(chan error, 1+len(a.runners))
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()
	stopRunners := startRunners(ctx, a.runners, func(err error) { errc <- err })
	defer stopRunners()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	// Shut down in reverse order of start-up: stop intake, finish in-flight
	// calls within a deadline, drain the queue of read audits, stop the
	// background loops, close the store (deferred a.close).
	logger.Info("shutting down")
	a.bot.BeginShutdown() // long polls answer now instead of holding shutdown
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Calls still running past the deadline are cut off, so that the
		// store can close; they were not acknowledged, and a retry with the
		// same Idempotency-Key runs them again.
		logger.Warn("http shutdown: in-flight calls did not finish in time; closing their connections", "grace", shutdownGrace, "err", err)
		_ = srv.Close()
	}
	wg.Wait()
	// Every HTTP answer has been given: commit the audit entries still
	// queued and clear the running marker. Verdicts the runners (chat) give
	// from now on are audited durably before they are answered.
	drainReadAudit(readAudit, logger)
	stopRunners()
	logger.Info("stopped")
	return runErr
}

// shutdownGrace is how long a stopping server waits for in-flight calls.
const shutdownGrace = 10 * time.Second

// drainGrace is how long a stopping server waits for the queue of read
// audits to be committed (a full queue commits in milliseconds).
const drainGrace = 10 * time.Second

// drainReadAudit ends a run's audit of read verdicts (serve's, mcp's):
// it commits the entries still queued and clears the running marker,
// within drainGrace; past it the next start records unclean_restart.
func drainReadAudit(ra *bot.ReadAudit, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), drainGrace)
	defer cancel()
	if err := ra.Close(ctx); err != nil {
		logger.Error("audit: the queue of read verdicts did not drain; the next start records unclean_restart", "err", err)
	}
}

// updateOffline runs fn in one system transaction on the configured
// store, opened here (keys create, keys rotate-callback-secret): on bbolt
// the server must be stopped, and openStore says so when it is not.
func updateOffline(ctx context.Context, cfg *config.Config, getenv func(string) string, fn func(tx *bot.Tx) error) error {
	db, key, err := openStore(ctx, cfg, getenv)
	if err != nil {
		return err
	}
	defer db.Close()
	b, err := bot.New(bot.Options{Store: db, SigningKey: key})
	if err != nil {
		return err
	}
	return b.Update(ctx, b.SystemCall(time.Now()), fn)
}

func cmdKeysCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys create", stderr)
	load := configFlag(fs)
	name := fs.String("name", "", "the principal's name (required)")
	role := fs.String("role", "", "admin, member, agent, viewer or auditor (required)")
	scopes := fs.String("scopes", "", "comma-separated user_ids the key may touch (default: all)")
	kind := fs.String("kind", "", "agent, person or service (default: person for admin and member, else agent)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var problems []string
	if *name == "" {
		problems = append(problems, "--name: required")
	}
	scopeList, err := bot.ParseScopes(*scopes)
	switch {
	case err != nil:
		problems = append(problems, "--"+err.Error())
	case flagSet(fs, "scopes") && *scopes == "":
		// An empty list (an unset shell variable) never widens to
		// every space: leaving the flag out does.
		problems = append(problems, `--scopes: "" names no user_id; list the user_ids the key may touch (a,b), or leave --scopes out for a key that may touch every space`)
	}
	r, err := policy.ParseRole(*role)
	if err != nil {
		problems = append(problems, "--role: "+err.Error())
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	var made bot.CreatedKey
	err = updateOffline(ctx, cfg, getenv, func(tx *bot.Tx) error {
		// Only the key is printed (stdout is for $(…)); keys
		// rotate-callback-secret prints a fresh callback secret.
		made, err = bot.CreateKey(tx, time.Now(), bot.NewKey{Name: *name, Role: r, Kind: *kind, Scopes: scopeList, Via: "cli"})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, made.Key)
	return nil
}

// flagSet reports whether the flag called name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// logStartup says what this run is made of: the config file, the store,
// what is gated, the tools declared and the chat surfaces, and warns loudly
// when no memory slot is gated, since a config file that leaves out the
// slots (or their confirm) silently applies every change.
func logStartup(logger *slog.Logger, cfg *config.Config) {
	gated := cfg.GatedSlots()
	chat := strings.Join(cfg.Sinks(), ",")
	if chat == "" {
		chat = "none"
	}
	logger.Info("config loaded", "file", cfg.Source(), "store", cfg.Store.Path,
		"gated_slots", len(gated), "slots", strings.Join(gated, ","), "tools_declared", len(cfg.Tools), "chat", chat, "web_console", cfg.Web.Served())
	if len(gated) == 0 {
		logger.Warn("NOTHING IS GATED: no memory slot has confirm: true, so every memory change (a medication replacement too) applies directly, with no approval. " +
			"Declare slots with confirm: true under memory.slots (see config.yaml, or `countersign init` for the annotated default).")
	}
	if len(cfg.Tools) == 0 {
		logger.Warn("no tools are declared: every confirm_action call needs a confirmation (the safe default), and no call is known as read-only or destructive; declare them under tools:")
	}
}

// applyMemoryLimit sets the runtime's soft memory limit from the config,
// unless GOMEMLIMIT is set in the environment (the runtime has read it
// then). It returns the limit in force and where it came from.
func applyMemoryLimit(l config.LimitsConfig, getenv func(string) string) (int64, string) {
	if getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	}
	n, err := config.ParseMemoryLimit(l.MemoryLimit)
	if err != nil { // refused at load; keep the runtime's own
		return debug.SetMemoryLimit(-1), "runtime"
	}
	debug.SetMemoryLimit(n)
	return n, "limits.memory_limit"
}
