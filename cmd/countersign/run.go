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

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// version is the release; set with -ldflags "-X main.version=..." at build.
var version = "0.1.0-dev"

const usage = `countersign — a chat-ops approval bot for AI agents

Usage:
  countersign serve [--config FILE]
  countersign keys create [--config FILE] --name NAME --role ROLE [--scopes a,b] [--kind agent|person|service]
  countersign mcp [--config FILE] [--key KEY]
  countersign audit verify [--config FILE] [--pubkey HEX]
  countersign audit export [--config FILE]
  countersign audit pubkey [--config FILE]
  countersign version

serve reads ./config.yaml when it exists, else the embedded default.
mcp serves MCP over stdin/stdout for a local agent (logs on stderr); with
auth_required: true it needs --key or $COUNTERSIGN_API_KEY.
audit verify exits non-zero when the chain is broken; audit export writes
the chain as JSON Lines. mcp, keys and audit need the server stopped.
`

// run is the whole program; main only calls it. Tests call it with their own
// arguments, environment and streams.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], getenv, stderr)
	case "keys":
		if len(args) < 2 || args[1] != "create" {
			fmt.Fprint(stderr, usage)
			return errors.New("usage: countersign keys create --name NAME --role ROLE")
		}
		return cmdKeysCreate(ctx, args[2:], stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "audit":
		return cmdAudit(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "countersign", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// configFlag adds --config to fs and returns a loader that applies the
// default: ./config.yaml if present, else the embedded default.
func configFlag(fs *flag.FlagSet) func() (*Config, error) {
	path := fs.String("config", "", "the config file (default ./config.yaml, else the embedded default)")
	return func() (*Config, error) {
		p := *path
		if p == "" && fileExists("config.yaml") {
			p = "config.yaml"
		}
		return loadConfig(p)
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func cmdServe(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	load := configFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if getenv("GOGC") == "" {
		// The live heap is a few MiB (the store is mapped, not loaded), so
		// a lazier collector costs little memory and measurably cuts the
		// CPU of every call (BENCHMARKS.md). GOGC in the environment wins.
		debug.SetGCPercent(400)
	}
	logger := newLogger(cfg, stderr)
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
	readAudit, err := a.bot.StartReadAudit(ctx, cfg.Audit.readAudit())
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           a.handler(),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("listening", "addr", ln.Addr().String(), "store", cfg.Store.Path, "tools", len(a.bot.Tools()))

	var wg sync.WaitGroup
	errc := make(chan error, 1+len(a.runners))
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()
	runCtx, cancelRunners := context.WithCancel(ctx)
	defer cancelRunners()
	var rwg sync.WaitGroup
	for _, r := range a.runners {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			if err := r.run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", r.name, err)
			}
		}()
	}

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
	dctx, cancelDrain := context.WithTimeout(context.Background(), drainGrace)
	if err := readAudit.Close(dctx); err != nil {
		logger.Error("audit: the queue of read verdicts did not drain; the next start records unclean_restart", "err", err)
	}
	cancelDrain()
	cancelRunners()
	rwg.Wait()
	logger.Info("stopped")
	return runErr
}

// shutdownGrace is how long a stopping server waits for in-flight calls.
const shutdownGrace = 10 * time.Second

// drainGrace is how long a stopping server waits for the queue of read
// audits to be committed (a full queue commits in milliseconds).
const drainGrace = 10 * time.Second

func cmdKeysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys create", stderr)
	load := configFlag(fs)
	name := fs.String("name", "", "the principal's name (required)")
	role := fs.String("role", "", "admin, member, agent, viewer or auditor (required)")
	scopes := fs.String("scopes", "", "comma-separated user_ids the key may touch (default: all)")
	kind := fs.String("kind", "", "agent, person or service (default: person for admin and member, else agent)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var problems []string
	if *name == "" {
		problems = append(problems, "--name: required")
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
	k := *kind
	if k == "" {
		k = "agent"
		if r == policy.RoleAdmin || r == policy.RoleMember {
			k = "person"
		}
	}
	db, key, err := openStore(cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	b, err := bot.New(bot.Options{Store: db, SigningKey: key})
	if err != nil {
		return err
	}
	var apiKey string
	sys := b.SystemCall(time.Now())
	err = b.Update(ctx, sys, func(tx *bot.Tx) error {
		p, k, err := bot.CreatePrincipal(tx, time.Now(), *name, r, k, bot.ParseScopes(*scopes))
		if err != nil {
			return err
		}
		apiKey = k
		return tx.Audit("create_principal", fmt.Sprintf("%s %q role=%s via cli", p.ID, p.Name, p.Role))
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, apiKey)
	return nil
}
