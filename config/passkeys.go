package config

import (
	"github.com/countersign/countersign/adapters/web"
)

// WebPasskeysConfig is web.passkeys: passkeys (WebAuthn) for step-up in
// the console (docs/identity.md, "Passkeys"). Set, a person registers a
// passkey after a fresh OIDC sign-in and steps up with it, and
// tools[].step_up.method may be passkey.
type WebPasskeysConfig struct {
	// RPID is the relying party id: the console's host name, or a domain
	// it is under (required).
	RPID string `yaml:"rp_id"`
	// Origins are the origins browsers reach the console at
	// (https://host[:port]); empty: web.public_url, else the request's own.
	Origins []string `yaml:"origins"`
	// DisplayName is the name browsers show for the console (default
	// Countersign).
	DisplayName string `yaml:"display_name"`
}

// Options is the section as the console takes it.
func (c *WebPasskeysConfig) Options() *web.Passkeys {
	if c == nil {
		return nil
	}
	return &web.Passkeys{RPID: c.RPID, Origins: c.Origins, DisplayName: c.DisplayName}
}

// validate checks web.passkeys: an rp_id the origins are under, and the
// OIDC sign-in that registering a passkey needs.
func (c *WebPasskeysConfig) validate(w WebConfig, p *problems) {
	if c == nil {
		return
	}
	if c.RPID == "" {
		p.add("web.passkeys.rp_id", "required: the console's host name (or a domain it is under), for example countersign.hospital.example; a passkey works only there")
	} else if err := web.ValidatePasskeys(c.Options(), w.PublicURL); err != nil {
		p.add("web.passkeys", "%v", err)
	}
	if w.OIDC == nil {
		p.add("web.passkeys", "registering a passkey needs a fresh sign-in at your identity provider, so passkeys need web.oidc (issuer, client_id, client_secret_env); set it, or remove web.passkeys")
	}
}
