package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/client/claudecode"
	"github.com/countersign/countersign/config"
)

// The environment variables `countersign hook` reads: its key
// (COUNTERSIGN_API_KEY, as for `countersign mcp`, is read after it), its
// config file (the hook never reads ./config.yaml: its working directory is
// the agent's project), and the deployment's public key it pins.
const (
	hookKeyEnv    = "COUNTERSIGN_KEY"
	hookConfigEnv = "COUNTERSIGN_CONFIG"
	hookPubKeyEnv = "COUNTERSIGN_PUBLIC_KEY"
)

// cmdHook runs `countersign hook claude-code`: it reads one hook event on
// stdin and prints Claude Code's answer on stdout (client/claudecode). It
// always exits 0 once it has read its input: whatever goes wrong (flags,
// config, key, server), it answers "ask", never "allow", and says why on
// stderr.
func cmdHook(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "claude-code" {
		return errors.New("usage: countersign hook claude-code [--config FILE] [--key KEY] [--url URL] [--pubkey HEX] (the hook event JSON on stdin)")
	}
	h := setupHook(args[1:], getenv, stderr)
	if errors.Is(h.Broken, flag.ErrHelp) {
		return flag.ErrHelp // --help: the usage is printed; no event to answer
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, claudecode.MaxInputBytes+1))
	if err != nil {
		fmt.Fprintf(stderr, "countersign: hook: reading stdin: %v\n", err)
	}
	_, err = stdout.Write(h.Handle(ctx, raw))
	return err
}

// setupHook builds the hook from its flags, config and environment. A
// problem with the config makes it Broken (every call is asked about); a
// problem with the key, the server URL or the public key leaves it without
// a client (only read-only tools and commands pass).
func setupHook(args []string, getenv func(string) string, stderr io.Writer) *claudecode.Hook {
	h := &claudecode.Hook{Log: stderr, Now: time.Now}
	fs := newFlagSet("hook claude-code", stderr)
	cfgPath := fs.String("config", "", "the config file (default $"+hookConfigEnv+", else the embedded default; never ./config.yaml)")
	keyFlag := fs.String("key", "", "an agent's API key (default $"+hookKeyEnv+", else $"+apiKeyEnv+")")
	urlFlag := fs.String("url", "", "the server's base URL (default $"+urlEnv+", else http:// and the config's listen)")
	pubFlag := fs.String("pubkey", "", "the deployment's public key, hex (default $"+hookPubKeyEnv+", else hooks.claude_code.public_key, else the public half of the config's audit.signing_key)")
	if err := parseFlags(fs, args); err != nil {
		h.Broken = fmt.Errorf("the hook's command line: %w", err)
		return h
	}
	path := *cfgPath
	if path == "" {
		path = getenv(hookConfigEnv)
	}
	cfg, err := config.Load(path)
	if err != nil {
		h.Broken = fmt.Errorf("%v; fix the file, or point --config (or $%s) at the server's config", err, hookConfigEnv)
		return h
	}
	h.Config = cfg.Hooks.ClaudeCode.Spec(getenv) // config/hooks.go

	key := apiKey(*keyFlag, getenv, hookKeyEnv, apiKeyEnv)
	if key == "" {
		h.NoClient = fmt.Errorf("no API key: set $%s to an agent key (`countersign keys create --role agent`), or pass --key", hookKeyEnv)
		return h
	}
	pub, err := hookPublicKey(*pubFlag, getenv, cfg, path != "")
	if err != nil {
		h.NoClient = err
		return h
	}
	base, err := serverURL(*urlFlag, func() (*config.Config, error) { return cfg, nil }, getenv)
	if err != nil {
		h.NoClient = err
		return h
	}
	if h.Client, err = client.New(base, key, pub); err != nil {
		h.NoClient = err
	}
	return h
}

// hookPublicKey is the key the hook pins: --pubkey, $COUNTERSIGN_PUBLIC_KEY,
// hooks.claude_code.public_key, or, for a config file named explicitly,
// the public half of its audit.signing_key (the server's own config on the
// server's machine). The embedded default's signing key path is relative
// to the working directory, the agent's project, so it is never trusted.
func hookPublicKey(flagKey string, getenv func(string) string, cfg *config.Config, explicit bool) (ed25519.PublicKey, error) {
	for _, s := range []struct{ from, v string }{
		{"--pubkey", flagKey}, {"$" + hookPubKeyEnv, getenv(hookPubKeyEnv)}, {"hooks.claude_code.public_key", cfg.Hooks.ClaudeCode.PublicKey},
	} {
		if s.v != "" {
			pub, err := client.ParsePublicKey(s.v)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", s.from, err)
			}
			return pub, nil
		}
	}
	if explicit {
		if pub, err := configuredPublicKey(cfg); err == nil {
			return pub, nil
		}
	}
	return nil, fmt.Errorf("no public key to verify receipts with: set hooks.claude_code.public_key (or $%s) to what `countersign audit pubkey --config SERVER_CONFIG` prints", hookPubKeyEnv)
}
