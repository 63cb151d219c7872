package config

import (
	"net/url"
	"strings"

	teamsadapter "github.com/countersign/countersign/adapters/teams"
)

// ---- teams ----

// TeamsConfig is the teams section (docs/teams.md); absent means Teams is
// off. The app's id and password (client secret) come from the
// environment; the URLs default to the public Bot Framework's and are
// overridable, so tests point them at a local fake.
type TeamsConfig struct {
	AppIDEnv       string `yaml:"app_id_env"`
	AppPasswordEnv string `yaml:"app_password_env"`
	// TenantID, when set, is the only Entra tenant whose activities are
	// taken (the same rule as slack.team_id).
	TenantID string `yaml:"tenant_id"`
	// APIURL is the Bot Connector service URL (the serviceUrl Teams sends).
	APIURL string `yaml:"api_url"`
	// TokenURL is the client-credentials token endpoint.
	TokenURL string `yaml:"token_url"`
	// OpenIDMetadataURL and Issuer check the tokens of inbound requests.
	OpenIDMetadataURL string `yaml:"openid_metadata_url"`
	Issuer            string `yaml:"issuer"`
	// Channels maps channel names to Teams conversation ids.
	Channels map[string]string `yaml:"channels"`
}

func (t *TeamsConfig) defaults() {
	if t.AppIDEnv == "" {
		t.AppIDEnv = "TEAMS_APP_ID"
	}
	if t.AppPasswordEnv == "" {
		t.AppPasswordEnv = "TEAMS_APP_PASSWORD"
	}
	if t.APIURL == "" {
		t.APIURL = teamsadapter.DefaultAPIURL
	}
	if t.TokenURL == "" {
		t.TokenURL = teamsadapter.DefaultTokenURL
	}
	if t.OpenIDMetadataURL == "" {
		t.OpenIDMetadataURL = teamsadapter.DefaultOpenIDMetadataURL
	}
	if t.Issuer == "" {
		t.Issuer = teamsadapter.DefaultIssuer
	}
}

func (t TeamsConfig) validate(p *problems) {
	if t.TenantID != "" && !teamsadapter.ValidObjectID(t.TenantID) {
		p.add("teams.tenant_id", "%q is not a tenant id; use your Entra tenant's id (a GUID, shown in the Entra admin center's overview)", t.TenantID)
	}
	for key, u := range map[string]string{"api_url": t.APIURL, "token_url": t.TokenURL, "openid_metadata_url": t.OpenIDMetadataURL, "issuer": t.Issuer} {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
			p.add("teams."+key, "%q is not an http(s) URL", u)
		}
	}
	if !strings.HasSuffix(t.APIURL, "/") {
		p.add("teams.api_url", "must end with '/'")
	}
	if t.Channels["default"] == "" {
		p.add("teams.channels.default", "required: memory proposals and consent requests go there (a conversation id such as 19:…@thread.tacv2)")
	}
	for name, id := range t.Channels {
		if id != "" && (strings.ContainsAny(id, "/?#% \\") || len(id) < 3) {
			p.add("teams.channels."+name, "%q is not a Teams conversation id (such as 19:…@thread.tacv2)", id)
		}
	}
}

// validateTeamsID checks a principal's Entra object id.
func validateTeamsID(key, id string, p *problems) {
	if id != "" && !teamsadapter.ValidObjectID(strings.TrimSpace(id)) {
		p.add(key, "%q is not an Entra object id; use the person's object id (a GUID such as 00000000-0000-0000-0000-000000000001, in the Entra admin center under Users)", id)
	}
}
