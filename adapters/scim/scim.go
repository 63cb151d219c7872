// Package scim provisions people from the organisation's directory: a
// SCIM 2.0 service provider (RFC 7643, 7644) at /scim/v2/Users and
// /scim/v2/Groups, on github.com/elimity-com/scim (routing, schema
// validation of every body, PATCH parsing, filters), for an identity
// provider such as Okta or Microsoft Entra ID holding a bearer token.
//
// A user links to the principal config.yaml declares for them (Match: by
// name, email or web mapping), or else is a stored principal of kind
// person the directory owns (bot.ProvisionPerson), so every replica sees
// them. config.yaml stays authoritative for what a linked person may do
// (role, scopes, chat identities); the directory is authoritative for
// whether they may do anything: active: false (or a deleted user)
// suspends the person (bot.Tx.Suspend) in the same transaction, and the
// one decision rule refuses a suspended person everywhere. Groups are
// stored with their members' principal names (bot.PutDirectoryGroup), the
// store-backed source of approver groups.
package scim

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/countersign/countersign/bot"
	scimlib "github.com/elimity-com/scim"
	scimerr "github.com/elimity-com/scim/errors"
	"github.com/elimity-com/scim/optional"
	"github.com/elimity-com/scim/schema"
)

// Prefix is where the service provider is mounted: the identity
// provider's "tenant URL" is the public URL followed by it.
const Prefix = "/scim/v2"

// MaxBody bounds a request body (1 MiB).
const MaxBody = 1 << 20

// Source names the directory in a suspension (bot.Suspension.Source).
const Source = "scim"

// Options configure New.
type Options struct {
	Bot *bot.Bot
	// Token is the bearer token the identity provider sends
	// (scim.token_env). Required.
	Token bot.Secret
	// Role is the role of a person the directory provisions that
	// config.yaml does not declare (scim.role; default member).
	Role string
	// Match returns the name of the principal config.yaml declares for a
	// directory user (by their userName and email addresses), or "" when
	// it declares none.
	Match func(userName string, emails []string) string
	// MaxResults bounds a list page (default 100).
	MaxResults int
	Logger     *slog.Logger
}

// Adapter is the SCIM service provider.
type Adapter struct {
	o      Options
	server scimlib.Server
	token  [32]byte
}

// New builds the service provider.
func New(o Options) (*Adapter, error) {
	if o.Bot == nil {
		return nil, errors.New("scim: no bot")
	}
	if strings.TrimSpace(string(o.Token)) == "" {
		return nil, errors.New("scim: no bearer token")
	}
	if o.Role == "" {
		o.Role = "member"
	}
	if o.Match == nil {
		o.Match = func(string, []string) string { return "" }
	}
	if o.MaxResults <= 0 {
		o.MaxResults = 100
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Adapter{o: o, token: sha256.Sum256([]byte(o.Token))}
	server, err := scimlib.NewServer(&scimlib.ServerArgs{
		ServiceProviderConfig: &scimlib.ServiceProviderConfig{
			DocumentationURI: optional.NewString("docs/identity.md"),
			AuthenticationSchemes: []scimlib.AuthenticationScheme{{
				Type: scimlib.AuthenticationTypeOauthBearerToken, Name: "Bearer token",
				Description: "The token of scim.token_env, as Authorization: Bearer <token>.", Primary: true,
			}},
			MaxResults:       o.MaxResults,
			SupportFiltering: true,
			SupportPatch:     true,
		},
		ResourceTypes: []scimlib.ResourceType{
			{
				ID: optional.NewString("User"), Name: "User", Endpoint: "/Users",
				Description: optional.NewString("A person who may decide in Countersign"),
				Schema:      schema.CoreUserSchema(),
				SchemaExtensions: []scimlib.SchemaExtension{
					{Schema: schema.ExtensionEnterpriseUser()},
				},
				Handler: users{a},
			},
			{
				ID: optional.NewString("Group"), Name: "Group", Endpoint: "/Groups",
				Description: optional.NewString("An approver group (approvers: {groups: [...]})"),
				Schema:      schema.CoreGroupSchema(),
				Handler:     groups{a},
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("scim: %w", err)
	}
	a.server = server
	return a, nil
}

// Handler serves everything under Prefix: the bearer token is checked
// first (401 without it), then the request goes to the SCIM server.
func (a *Adapter) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="scim"`)
			writeError(w, http.StatusUnauthorized, "A SCIM request needs Authorization: Bearer <token>, the token in the variable scim.token_env names. Set it as the secret token of the provisioning app at the identity provider.")
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/scim")
		r2.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		a.server.ServeHTTP(w, r2)
	})
}

// authorized compares the request's bearer token with ours in constant
// time (over their hashes, so the length is not compared apart).
func (a *Adapter) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], a.token[:]) == 1
}

// writeError writes a SCIM error body (RFC 7644 3.12).
func writeError(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/scim+json")
	w.WriteHeader(status)
	b := fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:api:messages:2.0:Error"],"status":"%d","detail":%q}`, status, detail)
	_, _ = w.Write([]byte(b))
}

// badRequest is a 400 the library renders (invalidValue) with detail.
func badRequest(detail string) error {
	return scimerr.ScimError{ScimType: scimerr.ScimTypeInvalidValue, Detail: detail, Status: http.StatusBadRequest}
}

// conflict is a 409 (uniqueness) with detail.
func conflict(detail string) error {
	return scimerr.ScimError{ScimType: scimerr.ScimTypeUniqueness, Detail: detail, Status: http.StatusConflict}
}

// fromBot maps an error of the core to a SCIM error: what the core calls
// invalid is a 400 naming the attribute; anything else stays an error
// the library answers with 500.
func fromBot(err error) error {
	var be *bot.Error
	if errors.As(err, &be) && be.Kind == bot.KindInvalid {
		return badRequest(be.Error())
	}
	return err
}
