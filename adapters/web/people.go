package web

import (
	"context"
	"fmt"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// suspended says why the person named name may not use the console now
// (bot.LoadSuspension: the organisation's directory deactivated them,
// their chat account is gone, or an admin suspended them), or "":
// checked on every request with a session, so a suspension ends the
// person's sessions at once, on every replica.
func (h *Handler) suspended(ctx context.Context, name string) (string, error) {
	var s *bot.Suspension
	err := h.o.Bot.View(ctx, func(tx kv.Tx) error {
		var err error
		s, err = bot.LoadSuspension(tx, name)
		return err
	})
	if err != nil || s == nil {
		return "", err
	}
	return fmt.Sprintf("%s is suspended from approving (%s), so it cannot use the console until the suspension is lifted.", name, s.Why()), nil
}

// directoryRef is the session reference of the person the directory
// provisioned under the OIDC claim value (their userName, case folded),
// for a person config.yaml does not list: "p:prin_…", or "" when there
// is none.
func (h *Handler) directoryRef(ctx context.Context, value string) (string, error) {
	var p *bot.Principal
	err := h.o.Bot.View(ctx, func(tx kv.Tx) error {
		var err error
		p, err = bot.DirectoryPrincipal(tx, strings.ToLower(strings.TrimSpace(value)))
		return err
	})
	if err != nil || p == nil {
		return "", err
	}
	return "p:" + p.ID, nil
}
