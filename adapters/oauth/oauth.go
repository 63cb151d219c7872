// Package oauth makes Countersign an OAuth 2.1 resource server beside its
// API keys, as MCP's authorization asks of a remote MCP server: it
// publishes Protected Resource Metadata (RFC 9728) naming the configured
// issuer, and accepts bearer JWT access tokens from that issuer, issued for
// this resource (audience), unexpired and signed by a key of the issuer's
// JWKS. The token's subject, read from a configured claim, is mapped to a
// principal: a configured person (principals[].web) or a stored principal
// (by name); its kind and role then decide what it may do, exactly as for
// an API key of that principal. A 401 carries WWW-Authenticate with the
// metadata's URL and, for a bad token, error="invalid_token".
//
// Signatures are checked against the issuer's keys by adapters/jwks (the
// one JWKS verifier, shared with the Teams endpoint: cached, fetched again
// when a token names a key it has not seen, the issuer's key rotation, at
// most every 30 seconds whatever the tokens name, and after a day); the
// key set is found by OpenID discovery or RFC 8414 metadata (go-oidc,
// the MCP SDK); the header's algorithm and the claims by golang-jwt.
package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/countersign/countersign/adapters/jwks"
	"github.com/countersign/countersign/bot"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// MetadataPath is the well-known path of the Protected Resource Metadata.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Leeway is the clock skew allowed on a token's exp, nbf and iat.
const Leeway = 30 * time.Second

// signingAlgs are the JWS algorithms accepted: asymmetric only, so that
// no token is "signed" with a public key as an HMAC secret, and never
// "none".
var signingAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Principals finds the stored principal a token's subject names.
type Principals interface {
	// PrincipalNamed returns the unrevoked stored principal named name,
	// or nil when there is none.
	PrincipalNamed(ctx context.Context, name string) (*bot.Principal, error)
}

// Options configure New.
type Options struct {
	// Issuer is the authorization server's issuer identifier.
	Issuer string
	// Audience is this resource's identifier (its canonical URL, as the
	// client names it in the token request's resource parameter): a
	// token is accepted only when its aud holds it.
	Audience string
	// Claim names the claim that holds the subject mapped to a principal
	// (email, sub, preferred_username…).
	Claim string
	// People is the directory of configured persons: a subject may name
	// one by their web identity (principals[].web), compared
	// case-insensitively. A match is the caller the person is in the
	// console (bot.ChatPrincipal.WebPrincipal: "web:NAME").
	People *bot.Directory
	// Stored finds a stored principal named by the subject, when no
	// configured person matches.
	Stored Principals
	// HTTPClient fetches the issuer's metadata and keys (nil: a client
	// with a 10-second timeout).
	HTTPClient *http.Client
	// Now is the clock (nil: time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Verifier authenticates bearer access tokens.
type Verifier struct {
	o      Options
	people map[string]bot.Principal // lower-cased identity
	parser *jwt.Parser
	keys   *jwks.Keys
}

// New returns a verifier for o. The issuer's metadata and keys are read
// at the first token (and again after a failure, at most every 30
// seconds), so that Countersign starts while the identity provider is
// away; until they are read every token is refused.
func New(o Options) (*Verifier, error) {
	if o.Issuer == "" || o.Audience == "" || o.Claim == "" {
		return nil, errors.New("oauth: Issuer, Audience and Claim are required")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	v := &Verifier{o: o, people: map[string]bot.Principal{}}
	for _, p := range o.People.People() {
		if k := strings.ToLower(strings.TrimSpace(p.Web)); k != "" {
			v.people[k] = p.WebPrincipal()
		}
	}
	v.parser = jwt.NewParser(jwt.WithValidMethods(signingAlgs), jwt.WithIssuer(o.Issuer), jwt.WithAudience(o.Audience),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(Leeway), jwt.WithTimeFunc(o.Now))
	keys, err := jwks.New(jwks.Options{Locate: v.discover, HTTPClient: o.HTTPClient, Now: o.Now, Logger: o.Logger.With("issuer", o.Issuer)})
	if err != nil {
		return nil, err
	}
	v.keys = keys
	return v, nil
}

// MetadataURL is the URL of the Protected Resource Metadata, on the
// audience's origin.
func (v *Verifier) MetadataURL() string {
	u, err := url.Parse(v.o.Audience)
	if err != nil {
		return MetadataPath
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: MetadataPath}).String()
}

// MetadataPaths are the paths the metadata is served at: the root form
// and, for an audience with a path (…/mcp), the path-suffixed form of
// RFC 9728 §3.1 that clients also try.
func (v *Verifier) MetadataPaths() []string {
	paths := []string{MetadataPath}
	if u, err := url.Parse(v.o.Audience); err == nil {
		if p := strings.TrimRight(u.Path, "/"); p != "" {
			paths = append(paths, MetadataPath+p)
		}
	}
	return paths
}

// MetadataHandler serves the Protected Resource Metadata.
func (v *Verifier) MetadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               v.o.Audience,
		AuthorizationServers:   []string{v.o.Issuer},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Countersign",
	})
}

// LooksLikeJWT reports whether token has the shape of a JWS compact
// serialization (three dot-separated parts), as an API key never does.
func LooksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2 && !strings.HasPrefix(token, bot.KeyPrefix)
}

// Error is a refused token: the bot's unauthenticated error, and the
// WWW-Authenticate challenge of its 401.
type Error struct {
	err       *bot.Error
	challenge string
}

func (e *Error) Error() string { return e.err.Error() }

// Unwrap returns the bot error, so that its kind maps to 401.
func (e *Error) Unwrap() error { return e.err }

// Challenge is the WWW-Authenticate value of the 401.
func (e *Error) Challenge() string { return e.challenge }

// Challenge is the WWW-Authenticate value of a 401 for a request that
// carries no credential: where to find the metadata.
func (v *Verifier) Challenge() string {
	return fmt.Sprintf("Bearer resource_metadata=%q", v.MetadataURL())
}

// refuse is a 401 for a bad token: invalid_token, and why.
func (v *Verifier) refuse(format string, args ...any) *Error {
	why := fmt.Sprintf(format, args...)
	msg := "Access denied: the bearer token was refused: " + why + ". Get a new access token from " + v.o.Issuer + " for the resource " + v.o.Audience + ", or use an API key."
	desc := strings.NewReplacer(`"`, "'", `\`, "/").Replace(why)
	return &Error{
		err:       bot.Errorf(bot.KindUnauthenticated, "%s", msg),
		challenge: fmt.Sprintf("Bearer resource_metadata=%q, error=\"invalid_token\", error_description=%q", v.MetadataURL(), desc),
	}
}

// Authenticate verifies an access token and returns the caller it maps to.
func (v *Verifier) Authenticate(ctx context.Context, token string) (*bot.Caller, error) {
	// The header first: an allowed asymmetric algorithm, never none.
	tok, _, err := v.parser.ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return nil, v.refuse("it is not a JWT signed with an asymmetric key (%s)", shortErr(err))
	}
	if !contains(signingAlgs, tok.Method.Alg()) {
		return nil, v.refuse("its algorithm %q is not accepted", tok.Method.Alg())
	}
	claims := jwt.MapClaims{}
	_, err = v.parser.ParseWithClaims(token, claims, v.keys.Keyfunc(ctx))
	switch {
	case errors.Is(err, jwks.ErrUnavailable):
		v.o.Logger.Warn("oauth: the issuer's keys could not be fetched", "issuer", v.o.Issuer, "err", err)
		return nil, v.refuse("the signing keys of its issuer could not be fetched; retry in a minute")
	case errors.Is(err, jwks.ErrUnknownKey):
		kid, _ := tok.Header["kid"].(string)
		return nil, v.refuse("it names a signing key (kid %q) its issuer does not publish", clip(kid, 80))
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return nil, v.refuse("its signature does not verify with the keys of %s", v.o.Issuer)
	case err != nil:
		return nil, v.refuse("%s", claimsProblem(err, v.o.Audience, v.o.Issuer))
	}
	subject, _ := claims[v.o.Claim].(string)
	if strings.TrimSpace(subject) == "" {
		return nil, v.refuse("it carries no %s claim (mcp.oauth.claim)", v.o.Claim)
	}
	return v.caller(ctx, subject)
}

// caller maps a subject to its principal.
func (v *Verifier) caller(ctx context.Context, subject string) (*bot.Caller, error) {
	if p, ok := v.people[strings.ToLower(strings.TrimSpace(subject))]; ok {
		return &bot.Caller{Principal: p}, nil
	}
	if v.o.Stored != nil {
		p, err := v.o.Stored.PrincipalNamed(ctx, subject)
		if err != nil {
			return nil, err
		}
		if p != nil {
			return &bot.Caller{Principal: *p}, nil
		}
	}
	return nil, v.refuse("%s %q is not mapped to a Countersign principal (principals[].web, or a principal of that name)", v.o.Claim, clip(subject, 80))
}

// discover reads the issuer's jwks_uri from its OpenID Connect discovery
// document, else from its OAuth 2.0 Authorization Server Metadata (RFC
// 8414); both check that the document names the configured issuer.
func (v *Verifier) discover(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	p, oidcErr := oidc.NewProvider(oidc.ClientContext(ctx, v.o.HTTPClient), v.o.Issuer)
	if oidcErr == nil {
		var m struct {
			JWKS string `json:"jwks_uri"`
		}
		if err := p.Claims(&m); err == nil && m.JWKS != "" {
			return m.JWKS, nil
		}
	}
	asm, err := auth.GetAuthServerMetadata(ctx, v.o.Issuer, v.o.HTTPClient)
	switch {
	case err != nil:
		return "", fmt.Errorf("OpenID discovery: %v; authorization server metadata: %v", oidcErr, err)
	case asm == nil || asm.JWKSURI == "":
		return "", fmt.Errorf("OpenID discovery: %v; the authorization server metadata names no jwks_uri", oidcErr)
	}
	return asm.JWKSURI, nil
}

// claimsProblem says which claim check failed.
func claimsProblem(err error, audience, issuer string) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "it has expired"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "it lacks a required claim (exp)"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "it was issued for another audience, not " + audience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "it was issued by another issuer, not " + issuer
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "it is not valid yet"
	}
	return shortErr(err)
}

func shortErr(err error) string { return clip(err.Error(), 120) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Authenticator authenticates a bearer credential: an API key through the
// bot, an access token through the verifier. It is what the HTTP API and
// MCP over HTTP authenticate with when OAuth is configured.
type Authenticator struct {
	Keys interface {
		Authenticate(context.Context, string) (*bot.Caller, error)
	}
	Verifier *Verifier
}

// Authenticate resolves a bearer credential to its caller. A missing one
// is refused with the challenge that names the metadata.
func (a Authenticator) Authenticate(ctx context.Context, credential string) (*bot.Caller, error) {
	if LooksLikeJWT(credential) {
		return a.Verifier.Authenticate(ctx, credential)
	}
	c, err := a.Keys.Authenticate(ctx, credential)
	var be *bot.Error
	if err != nil && errors.As(err, &be) && be.Kind == bot.KindUnauthenticated {
		challenge := a.Verifier.Challenge()
		if credential != "" {
			challenge += `, error="invalid_token", error_description="unknown or revoked API key"`
		}
		return nil, &Error{err: be, challenge: challenge}
	}
	return c, err
}
