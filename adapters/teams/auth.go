package teams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign/adapters/jwks"
	"github.com/golang-jwt/jwt/v5"
)

// The inbound token check: the claims and the header's algorithm through
// golang-jwt, the issuer's keys through adapters/jwks (the one JWKS
// verifier, shared with the MCP OAuth resource server): cached by key
// id, fetched again when a token names a key id the cache does not hold
// (the Bot Framework's rotation) at most every 30 seconds, whatever the
// tokens name, and after a day; a token whose signature fails with a
// cached key fetches nothing, so a stream of forged tokens costs the
// issuer at most one request per interval and cannot hold up the next
// genuine one. The Bot Framework publishes metadata whose issuer is not
// its URL's prefix, so the metadata is read here for its jwks_uri (and
// its issuer checked against the configured one) at each fetch.

// tokenLeeway is the clock skew allowed on exp and nbf: the Bot
// Framework's own validation allows five minutes.
const tokenLeeway = 5 * time.Minute

// signingAlgs are the JWS algorithms accepted: the Bot Framework signs
// with RS256; asymmetric only, never none or an HMAC.
var signingAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}

// verifier checks the bearer token of each inbound request.
type verifier struct {
	metadataURL string
	issuer      string
	client      *http.Client
	parser      *jwt.Parser
	keys        *jwks.Keys
}

func newVerifier(metadataURL, issuer, audience string, client *http.Client, now func() time.Time, log *slog.Logger) (*verifier, error) {
	v := &verifier{
		metadataURL: metadataURL, issuer: issuer, client: client,
		parser: jwt.NewParser(jwt.WithValidMethods(signingAlgs), jwt.WithIssuer(issuer), jwt.WithAudience(audience),
			jwt.WithExpirationRequired(), jwt.WithLeeway(tokenLeeway), jwt.WithTimeFunc(now)),
	}
	keys, err := jwks.New(jwks.Options{Locate: v.locate, HTTPClient: client, Now: now, Logger: log.With("issuer", issuer, "metadata", metadataURL)})
	if err != nil {
		return nil, err
	}
	v.keys = keys
	return v, nil
}

// errToken is a refused token; its text is safe to answer with.
type errToken struct{ why string }

func (e errToken) Error() string { return "the request's token was refused: " + e.why }

// check verifies the Authorization header of a request claiming to come
// from serviceURL: signature, algorithm, issuer, audience, expiry, and the
// serviceurl claim naming the same service URL.
func (v *verifier) check(ctx context.Context, authorization, serviceURL string) error {
	raw, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || strings.TrimSpace(raw) == "" {
		return errToken{"no bearer token (Authorization: Bearer …)"}
	}
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(strings.TrimSpace(raw), claims, v.keys.Keyfunc(ctx))
	if err != nil {
		return errToken{tokenProblem(err)}
	}
	su, _ := claims["serviceurl"].(string)
	if su == "" {
		su, _ = claims["serviceUrl"].(string)
	}
	if su == "" || serviceURL == "" || !sameServiceURL(su, serviceURL) {
		return errToken{"its serviceurl claim does not name the activity's service URL"}
	}
	return nil
}

// sameServiceURL compares two service URLs, a trailing slash aside.
func sameServiceURL(a, b string) bool {
	return strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(b, "/"))
}

// tokenProblem says which check refused a token.
func tokenProblem(err error) string {
	switch {
	case errors.Is(err, jwks.ErrUnknownKey):
		return jwks.ErrUnknownKey.Error()
	case errors.Is(err, jwks.ErrUnavailable), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the issuer's signing keys could not be fetched"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "its signature does not verify with the issuer's keys"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "it is not a JWT"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "it has expired"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "it lacks its expiry (exp)"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "it was issued for another app"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "it was issued by another issuer"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "it is not valid yet"
	}
	return "it is not a JWT signed with an accepted algorithm"
}

// locate reads the metadata's jwks_uri, checking that it names the
// configured issuer.
func (v *verifier) locate(ctx context.Context) (string, error) {
	var m struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := jwks.GetJSON(ctx, v.client, v.metadataURL, &m); err != nil {
		return "", fmt.Errorf("the OpenID metadata: %w", err)
	}
	if m.JWKSURI == "" {
		return "", errors.New("the OpenID metadata names no jwks_uri")
	}
	if m.Issuer != "" && m.Issuer != v.issuer {
		return "", fmt.Errorf("the OpenID metadata names the issuer %q, not %q (teams.issuer)", m.Issuer, v.issuer)
	}
	return m.JWKSURI, nil
}
