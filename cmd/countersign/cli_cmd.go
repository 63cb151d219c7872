package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	countersign "github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/config"
)

// urlEnv names the environment variable `ready` and `call` read the
// server's base URL from (the --url flag overrides it).
const urlEnv = "COUNTERSIGN_URL"

// apiKey is the API key a command acts with: its --key flag, else the
// first of envs that is set, with surrounding white space (a newline
// pasted with it) taken off.
func apiKey(flagKey string, getenv func(string) string, envs ...string) string {
	key := strings.TrimSpace(flagKey)
	for _, env := range envs {
		if key == "" {
			key = strings.TrimSpace(getenv(env))
		}
	}
	return key
}

// errExit1 makes the program exit 1 without printing anything more: the
// command has already said what happened.
var errExit1 = errors.New("")

// cmdInit writes the annotated default config to ./config.yaml (or
// --config), so that a deployment starts from the gated default rather than
// from an empty file. It never overwrites a file.
func cmdInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("init", stderr)
	path := fs.String("config", "config.yaml", "where to write the starter config")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := os.OpenFile(*path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("init: %s already exists and is left as it is (remove it first, or write elsewhere with --config FILE)", *path)
	}
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if _, err := f.Write(countersign.DefaultConfig); err != nil {
		f.Close()
		return fmt.Errorf("init: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s: the annotated default; edit it, then run countersign serve --config %s\n", *path, *path)
	return nil
}

// serverURL is the base URL of the server the config describes: --url,
// else $COUNTERSIGN_URL, else http:// and the listen address (after
// $COUNTERSIGN_LISTEN), with a wildcard host read as 127.0.0.1.
func serverURL(flagURL string, load func() (*config.Config, error), getenv func(string) string) (string, error) {
	if flagURL != "" {
		return strings.TrimRight(flagURL, "/"), nil
	}
	if u := getenv(urlEnv); u != "" {
		return strings.TrimRight(u, "/"), nil
	}
	cfg, err := load()
	if err != nil {
		return "", err
	}
	if err := cfg.OverrideListen("", getenv(config.ListenEnv)); err != nil {
		return "", err
	}
	return config.LocalURL(cfg.Listen), nil
}

// cmdReady waits until a running server answers GET /readyz with 200, so
// that a script (or a reader pasting the README) calls it only once it
// listens.
func cmdReady(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ready", stderr)
	load := configFlag(fs)
	urlFlag := fs.String("url", "", "the server's base URL (default $"+urlEnv+", else http:// and the config's listen)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	base, err := serverURL(*urlFlag, load, getenv)
	if err != nil {
		return err
	}
	api, err := client.NewAPI(base, "")
	if err != nil {
		return fmt.Errorf("ready: %w", err)
	}
	api.HTTP.Timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := api.WaitReady(ctx, 100*time.Millisecond); err != nil {
		return fmt.Errorf("ready: %s did not become ready within %s (%v); is `countersign serve` running? its log says why it stopped", base, *timeout, err)
	}
	fmt.Fprintf(stdout, "ready: %s\n", base)
	return nil
}

// cmdCall calls one tool on a running server and prints the answer's text;
// on an answer other than 200 it prints the HTTP status, then the error
// (prefixed by the argument at fault) and, when there is one, the field
// (--json: the whole answer; --field NAME: one field of its data, for
// scripts). It exits 1 on any answer other than 2xx, and when no server
// answers.
func cmdCall(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("call", stderr)
	load := configFlag(fs)
	urlFlag := fs.String("url", "", "the server's base URL (default $"+urlEnv+", else http:// and the config's listen)")
	keyFlag := fs.String("key", "", "the API key (default $"+apiKeyEnv+")")
	raw := fs.Bool("json", false, "print the whole JSON answer instead of its text")
	field := fs.String("field", "", "print only this field of the answer's data (a string as it is, anything else as JSON), e.g. request_id")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: countersign call [flags] TOOL [JSON_ARGS]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return errors.New("call: give a tool name and, optionally, its arguments as one JSON object")
	}
	tool, body := fs.Arg(0), "{}"
	if fs.NArg() == 2 {
		body = fs.Arg(1)
	}
	key := apiKey(*keyFlag, getenv, apiKeyEnv)
	if key == "" {
		return fmt.Errorf("call: no API key: give --key KEY or set $%s (countersign keys create prints one)", apiKeyEnv)
	}
	base, err := serverURL(*urlFlag, load, getenv)
	if err != nil {
		return err
	}
	api, err := client.NewAPI(base, key)
	if err != nil {
		return fmt.Errorf("call: %w", err)
	}
	ans, err := api.Call(ctx, tool, json.RawMessage(body))
	var te *client.TransportError
	if errors.As(err, &te) {
		return fmt.Errorf("call: no answer from %s: %v (is `countersign serve` running? `countersign ready` waits for it)", base, te.Err)
	}
	if err != nil {
		return fmt.Errorf("call: %w", err)
	}
	if ans.Status != http.StatusOK {
		fmt.Fprintf(stdout, "%d %s\n", ans.Status, http.StatusText(ans.Status))
	}
	switch {
	case *raw:
		stdout.Write(bytes.TrimRight(ans.Raw, "\n"))
		fmt.Fprintln(stdout)
	case !ans.OK():
		fmt.Fprintln(stdout, ans.Message())
		if ans.Field != "" {
			fmt.Fprintf(stdout, "field: %s\n", ans.Field)
		}
	case *field != "":
		v, err := ans.DataField(*field)
		if err != nil {
			return fmt.Errorf("call: %w", err)
		}
		fmt.Fprintln(stdout, v)
	default:
		fmt.Fprintln(stdout, ans.Message())
	}
	if !ans.OK() {
		return errExit1
	}
	return nil
}
