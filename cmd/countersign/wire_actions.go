package main

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/bot/actiontools"
)

// wireActions wires action-approval tools, soft approval, ask_user, callbacks and the sweeper.
func (a *app) wireActions(ctx context.Context) error {
	cfg := a.cfg
	o := cfg.ActionOptions() // config/wire_options.go
	if env := cfg.Callbacks.SecretEnv; env != "" {
		if v := a.getenv(env); v != "" {
			secret, err := actiontools.ParseSecret(v)
			if err != nil {
				return fmt.Errorf("callbacks.secret_env: $%s: %v", env, err)
			}
			if len(secret) < 16 {
				a.log.Warn("the callback signing secret is short; use at least 16 random bytes (whsec_ plus base64 of 32 bytes is recommended)", "env", env, "bytes", len(secret))
			}
			o.CallbackSecret = secret
		} else {
			a.log.Warn("callbacks.secret_env names an empty variable; confirm_action with a callback_url is refused until it is set", "env", env)
		}
	}
	svc, err := actiontools.Register(a.bot, o)
	if err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	// Callback secrets stored before they were sealed are sealed now
	// (bot.SealCallbackSecrets): a copy of the store signs no callback.
	if n, err := a.bot.SealCallbackSecrets(ctx); err != nil {
		return fmt.Errorf("sealing the callback secrets: %w", err)
	} else if n > 0 {
		a.log.Info("sealed the callback signing secrets stored in plaintext", "count", n)
	}
	a.wakeStatus = svc.Wake
	a.bot.Outbox().TrackSink(actiontools.CallbackSink)
	a.runners = append(a.runners,
		runner{name: "callbacks", run: func(ctx context.Context) error {
			return a.bot.Outbox().Run(ctx, actiontools.CallbackSink, time.Second, svc.DeliverCallback)
		}},
		runner{name: "sweeper", run: func(ctx context.Context) error {
			return a.bot.RunSweeps(ctx, a.cfg.Sweep.Schedule, a.log)
		}},
	)
	return nil
}
