package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/adapters/web"
	"github.com/countersign/countersign/bot"
)

// WebConfig is the web section: the browser console under /ui/.
type WebConfig struct {
	// Enabled serves the console (default true).
	Enabled *bool `yaml:"enabled"`
	// PublicURL is where people reach Countersign (https://host, no path):
	// the base of sign-in links and of the OIDC redirect. Empty: the
	// request's own host (links printed by the CLI then use listen).
	PublicURL string `yaml:"public_url"`
	// SessionTTL is how long a browser session lasts (default 12h).
	SessionTTL time.Duration `yaml:"session_ttl"`
	// OIDC, when set, offers single sign-on.
	OIDC *WebOIDCConfig `yaml:"oidc"`
	// Passkeys, when set, offers passkeys for step-up (passkeys.go).
	Passkeys *WebPasskeysConfig `yaml:"passkeys"`
	// RatePerMinute and RateBurst limit each console client's requests (a
	// signed-in session, else an address); 0: 600 a minute, bursts of 120.
	RatePerMinute int `yaml:"rate_per_minute"`
	RateBurst     int `yaml:"rate_burst"`
}

// WebOIDCConfig configures sign-in through an OpenID Connect provider.
type WebOIDCConfig struct {
	Issuer          string `yaml:"issuer"`
	ClientID        string `yaml:"client_id"`
	ClientSecretEnv string `yaml:"client_secret_env"`
	// Claim is the ID token claim whose value maps to principals[].web
	// (default email).
	Claim string `yaml:"claim"`
}

// Served reports whether the console is served (the default).
func (w WebConfig) Served() bool { return w.Enabled == nil || *w.Enabled }

// Options are the console's options from the web section, with the people
// of the directory (web.PeopleOf); the OIDC client secret is read from the
// variable web.oidc.client_secret_env names, and an unset one is an error
// naming it. What only the running process holds (the bot, the link key,
// the logger) is the caller's to add.
func (w WebConfig) Options(getenv func(string) string, people *bot.Directory) (web.Options, error) {
	o := web.Options{
		People:     web.PeopleOf(people),
		PublicURL:  w.PublicURL,
		SessionTTL: w.SessionTTL,
		// Per client: a session, else an address (adapters/web).
		RatePerMinute: w.RatePerMinute,
		RateBurst:     w.RateBurst,
		Passkeys:      w.Passkeys.Options(), // passkeys.go
	}
	if oc := w.OIDC; oc != nil {
		secret := getenv(oc.ClientSecretEnv)
		if secret == "" {
			return o, fmt.Errorf("web.oidc.client_secret_env: the environment variable %s is not set; set it to the OIDC client secret", oc.ClientSecretEnv)
		}
		o.OIDC = &web.OIDC{Issuer: oc.Issuer, ClientID: oc.ClientID, ClientSecret: secret, Claim: oc.Claim}
	}
	return o, nil
}

// validate reports what is wrong with the web section and the principals'
// web identities.
func (w WebConfig) validate(ps []PrincipalDecl, p *problems) {
	bad := p.add
	if w.PublicURL != "" {
		u, err := url.Parse(w.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad("web.public_url", "%q is not a base URL; use scheme and host only, for example https://countersign.example.org", w.PublicURL)
		}
	}
	if w.SessionTTL < 0 {
		bad("web.session_ttl", "must not be negative")
	}
	if w.RatePerMinute < 0 {
		bad("web.rate_per_minute", "must not be negative (0 is the default, %d a minute per client)", web.DefaultRatePerMinute)
	}
	if w.RateBurst < 0 {
		bad("web.rate_burst", "must not be negative (0 is the default, bursts of %d per client)", web.DefaultRateBurst)
	}
	if o := w.OIDC; o != nil {
		if u, err := url.Parse(o.Issuer); o.Issuer == "" || err != nil || u.Scheme == "" || u.Host == "" {
			bad("web.oidc.issuer", "required: the provider's issuer URL, for example https://accounts.google.com")
		}
		if o.ClientID == "" {
			bad("web.oidc.client_id", "required: the client id registered at the provider")
		}
		if o.ClientSecretEnv == "" {
			bad("web.oidc.client_secret_env", "required: the name of the environment variable that holds the client secret")
		}
	}
	w.Passkeys.validate(w, p) // passkeys.go
	seen := map[string]string{}
	for i, pr := range ps {
		if pr.Web == "" {
			continue
		}
		k := strings.ToLower(strings.TrimSpace(pr.Web))
		if other, dup := seen[k]; dup {
			bad(fmt.Sprintf("principals[%d].web", i), "%q is already the web identity of %s; map each to one principal", pr.Web, other)
		}
		seen[k] = pr.Name
	}
}
