package config

import (
	"fmt"

	"github.com/countersign/countersign/bot/actiontools"
)

// validate refuses a callbacks.allowed_hosts entry that can never match
// (actiontools.ParseCallbackAllow says which shapes match).
func (c CallbackConfig) validate(p *problems) {
	for i, h := range c.AllowedHosts {
		if _, err := actiontools.ParseCallbackAllow(h); err != nil {
			p.add(fmt.Sprintf("callbacks.allowed_hosts[%d]", i), "%v; write a host (default ports 80/443), host:port, or a URL prefix such as https://agent.example:8443/callbacks/", err)
		}
	}
}
