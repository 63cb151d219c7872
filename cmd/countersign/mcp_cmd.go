package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"syscall"

	"github.com/countersign/countersign/adapters/mcp"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// apiKeyEnv names the environment variable `countersign mcp` reads a key from.
const apiKeyEnv = "COUNTERSIGN_API_KEY"

// localCaller is the trusted local admin of a stdio session when the
// configuration does not require authentication.
func localCaller() *bot.Caller {
	return &bot.Caller{Principal: bot.Principal{ID: "local", Name: "local", Role: policy.RoleAdmin, Kind: "person"}, Surface: "mcp"}
}

// cmdMCP serves MCP over stdin and stdout for a local agent, on the same
// store and tools as serve (which must not be running: the store has one
// process at a time). Logs go to stderr; stdout carries only the protocol.
func cmdMCP(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("mcp", stderr)
	load := configFlag(fs)
	keyFlag := fs.String("key", "", "an API key to act as (default: $"+apiKeyEnv+"); required when the config sets auth_required: true")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := newLogger(cfg, stderr)
	a, err := buildApp(ctx, cfg, getenv, logger)
	if err != nil {
		return err
	}
	defer a.close()

	key := bot.Secret(*keyFlag)
	if key == "" {
		key = bot.Secret(getenv(apiKeyEnv))
	}
	var callerOf mcp.CallerFunc
	switch {
	case key != "":
		// Looked up on every call, so that revoking the key takes effect at once.
		callerOf = func(ctx context.Context, _ *sdk.CallToolRequest) (*bot.Caller, error) {
			c, err := a.bot.Authenticate(ctx, key.Reveal())
			if err != nil {
				return nil, err
			}
			c.Surface = "mcp"
			return c, nil
		}
		if _, err := a.bot.Authenticate(ctx, key.Reveal()); err != nil {
			logger.Warn("mcp: the API key given does not authenticate; every call will be refused", "err", err)
		}
	case cfg.AuthRequired:
		logger.Warn("mcp: auth_required is true and no key was given (--key or " + apiKeyEnv + "); every call will be refused")
		callerOf = func(context.Context, *sdk.CallToolRequest) (*bot.Caller, error) { return nil, nil }
	default:
		callerOf = func(context.Context, *sdk.CallToolRequest) (*bot.Caller, error) { return localCaller(), nil }
	}

	// As under serve: record unclean_restart if the last run did not stop
	// cleanly, and queue the audit of read verdicts.
	readAudit, err := a.bot.StartReadAudit(ctx, cfg.Audit.readAudit())
	if err != nil {
		return err
	}
	runCtx, cancelRunners := context.WithCancel(ctx)
	defer cancelRunners()
	var rwg sync.WaitGroup
	for _, r := range a.runners {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			if err := r.run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				logger.Error("background loop stopped", "loop", r.name, "err", err)
			}
		}()
	}
	logger.Info("mcp: serving on stdio", "store", cfg.Store.Path, "tools", len(a.bot.Tools()))
	err = mcp.ServeStdio(ctx, mcp.Options{App: a.bot, Caller: callerOf, Version: version, Logger: logger, MaxCallWait: cfg.MCP.MaxCallWait}, stdin, stdout)
	dctx, cancelDrain := context.WithTimeout(context.Background(), drainGrace)
	if cerr := readAudit.Close(dctx); cerr != nil {
		logger.Error("audit: the queue of read verdicts did not drain; the next start records unclean_restart", "err", cerr)
	}
	cancelDrain()
	cancelRunners()
	rwg.Wait()
	logger.Info("mcp: stopped")
	return err
}
