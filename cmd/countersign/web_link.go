package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/adapters/web"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/config"
)

// askServerForLink asks the running server at base for a sign-in link
// (web_link) with key, and returns the URL to print: the server's, when
// web.public_url is set, else the link on the address it was reached at.
func askServerForLink(ctx context.Context, cfg *config.Config, base, key, name string) (string, error) {
	api, err := client.NewAPI(base, key)
	if err != nil {
		return "", fmt.Errorf("web link: %w", err)
	}
	args, _ := json.Marshal(web.LinkArgs{Name: name})
	ans, err := api.Call(ctx, "web_link", json.RawMessage(args))
	var te *client.TransportError
	if errors.As(err, &te) {
		return "", fmt.Errorf("web link: no answer from %s: %v (is `countersign serve` running? Without --key the link is made here, for a principal under principals: in the config)", base, te.Err)
	}
	if err != nil {
		return "", fmt.Errorf("web link: %w", err)
	}
	if !ans.OK() {
		return "", fmt.Errorf("web link: the server at %s answered %d: %s", base, ans.Status, ans.Message())
	}
	u, _ := ans.Data["url"].(string)
	tok, _ := ans.Data["token"].(string)
	if u == "" || tok == "" {
		return "", fmt.Errorf("web link: the server's answer holds no link (%s)", strings.TrimSpace(string(ans.Raw)))
	}
	if cfg.Web.PublicURL != "" {
		return u, nil
	}
	return web.SignInURL(base, tok), nil
}
