package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/countersign/countersign/bot"
)

// cmdKeysRotateCallbackSecret replaces a principal's callback signing
// secret and prints the new one (shown once), with the server stopped, like
// keys create. Callbacks of its requests are signed with it from the next
// delivery on; the old one stops verifying.
func cmdKeysRotateCallbackSecret(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys rotate-callback-secret", stderr)
	load := configFlag(fs)
	name := fs.String("name", "", "the principal's name (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("--name: required")
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	var secret string
	err = updateOffline(ctx, cfg, getenv, func(tx *bot.Tx) error {
		_, secret, err = bot.RotateCallbackSecret(tx, *name, "cli")
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, secret)
	return nil
}
