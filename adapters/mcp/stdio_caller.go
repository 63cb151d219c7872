package mcp

import (
	"context"
	"log/slog"

	"github.com/countersign/countersign/bot"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// KeyAuthenticator resolves an API key to its caller (a *bot.Bot).
type KeyAuthenticator interface {
	Authenticate(ctx context.Context, key string) (*bot.Caller, error)
}

// KeyCaller is how a stdio session acting with an API key finds the
// caller of each call: the key's principal, looked up on every call, so
// that revoking the key takes effect at once, and refused (the
// authenticator's error) once it no longer authenticates.
func KeyCaller(auth KeyAuthenticator, key bot.Secret) CallerFunc {
	return func(ctx context.Context, _ *sdk.CallToolRequest) (*bot.Caller, error) {
		c, err := auth.Authenticate(ctx, key.Reveal())
		if err != nil {
			return nil, err
		}
		c.Surface = "mcp"
		return c, nil
	}
}

// LocalAgentCaller is the caller of every call of a keyless stdio session:
// bot.LocalAgent on the surface mcp, with a warning logged for each call and the tool it names.
func LocalAgentCaller(logger *slog.Logger) CallerFunc {
	return func(_ context.Context, req *sdk.CallToolRequest) (*bot.Caller, error) {
		tool := ""
		if req != nil && req.Params != nil {
			tool = req.Params.Name
		}
		logger.Warn("mcp: a call as the keyless local agent", "principal", "local [local]", "tool", tool)
		c := bot.LocalAgent()
		c.Surface = "mcp"
		return c, nil
	}
}
