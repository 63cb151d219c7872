package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/countersign/countersign/adapters/mcp"
	"github.com/countersign/countersign/bot"
)

// apiKeyEnv names the environment variable `countersign mcp` reads a key from.
const apiKeyEnv = "COUNTERSIGN_API_KEY"

// localAgentFlag names the flag that lets `countersign mcp` run without a
// key, as the local agent.
const localAgentFlag = "local-agent"

// errNoStdioKey is the refusal to start `countersign mcp` without a key.
var errNoStdioKey = errors.New("mcp: no API key: pass --key or set " + apiKeyEnv + " (an empty variable in an MCP host's config is no key). " +
	"A stdio server never decides or administers without a credential: create a key with `countersign keys create --name NAME --role agent`, " +
	"or pass --" + localAgentFlag + " to act as the keyless local agent \"local\" (role agent: it may propose and ask, never approve or administer)")

// stdioCaller returns how `countersign mcp` finds the caller of each call:
// the key's principal (mcp.KeyCaller), or, with --local-agent and no key,
// the local agent (mcp.LocalAgentCaller). Without either it refuses to start.
func stdioCaller(ctx context.Context, a *app, key bot.Secret, localAgent, authRequired bool, logger *slog.Logger) (mcp.CallerFunc, error) {
	switch {
	case key != "":
		if _, err := a.bot.Authenticate(ctx, key.Reveal()); err != nil {
			logger.Warn("mcp: the API key given does not authenticate; every call will be refused", "err", err)
		}
		return mcp.KeyCaller(a.bot, key), nil
	case !localAgent:
		return nil, errNoStdioKey
	case authRequired:
		return nil, fmt.Errorf("mcp: --%s is refused because the config sets auth_required: true; pass --key or set %s", localAgentFlag, apiKeyEnv)
	}
	logger.Warn("mcp: serving without a key as the local agent local [local] (--" + localAgentFlag + "): it may propose and ask, never approve, decide or administer; every call it makes is logged")
	return mcp.LocalAgentCaller(logger), nil
}

// cmdMCP serves MCP over stdin and stdout for a local agent, on the same
// store and tools as serve (which must not be running: the store has one
// process at a time). Logs go to stderr; stdout carries only the protocol.
func cmdMCP(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("mcp", stderr)
	load := configFlag(fs)
	keyFlag := fs.String("key", "", "an API key to act as (default: $"+apiKeyEnv+"); required unless --"+localAgentFlag+" is given")
	localAgent := fs.Bool(localAgentFlag, false, "with no key, act as the local agent \"local\" (role agent: never approves, decides or administers; every call is logged); refused when the config sets auth_required: true")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp: unexpected argument %q", fs.Arg(0))
	}
	key := bot.Secret(apiKey(*keyFlag, getenv, apiKeyEnv))
	if key == "" && !*localAgent {
		return errNoStdioKey // before the store is opened: nothing to undo
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := slog.New(cfg.Log.Handler(stderr))
	a, err := buildApp(ctx, cfg, getenv, logger)
	if err != nil {
		return err
	}
	defer a.close()
	callerOf, err := stdioCaller(ctx, a, key, *localAgent, cfg.AuthRequired, logger)
	if err != nil {
		return err
	}

	// As under serve: record unclean_restart if the last run did not stop
	// cleanly, and queue the audit of read verdicts.
	readAudit, err := a.bot.StartReadAudit(ctx, a.readAuditOptions())
	if err != nil {
		return err
	}
	a.setRun(readAudit.Run()) // the owner of the gateway's forwarding markers
	stopRunners := startRunners(ctx, a.runners, func(err error) { logger.Error("background loop stopped", "err", err) })
	defer stopRunners()
	logger.Info("mcp: serving on stdio", "store", cfg.Store.Path, "tools", len(a.bot.Tools()))
	err = mcp.ServeStdio(ctx, mcp.Options{
		App: a.bot, Caller: callerOf, Version: version, Logger: logger, MaxCallWait: cfg.MCP.MaxCallWait,
		StateKey: mcp.StateKey(a.key.Seed()), ItemURL: a.bot.WebLinks().ItemURL, Now: a.bot.Now,
		Upstreams: a.upstreams, // wire_gateway.go
	}, stdin, stdout)
	drainReadAudit(readAudit, logger)
	// A clean stop, as serve's: the leader's loops see it and do their
	// last work (the final anchor of the chain's head) before they end.
	a.bot.BeginShutdown()
	stopRunners()
	logger.Info("mcp: stopped")
	return err
}
