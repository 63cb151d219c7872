package teams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
)

// The inbound token check, in the pattern of adapters/oauth: the
// signature through go-oidc's remote key set (cached, fetched again when a
// token names a key it has not seen, which is how the Bot Framework's key
// rotation is followed), the header's algorithm and the claims through
// golang-jwt. The Bot Framework publishes OpenID metadata whose issuer is
// not its URL's prefix, so the metadata is read here for its jwks_uri
// (and its issuer checked against the configured one) rather than through
// go-oidc's discovery.

// tokenLeeway is the clock skew allowed on exp and nbf: the Bot
// Framework's own validation allows five minutes.
const tokenLeeway = 5 * time.Minute

// rediscoverEvery bounds how often the metadata is read again after a
// failure, and how often a token naming an unknown key may make the key
// set be fetched again.
const rediscoverEvery = 30 * time.Second

// signingAlgs are the JWS algorithms accepted: the Bot Framework signs
// with RS256; asymmetric only, never none or an HMAC.
var signingAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}

// verifier checks the bearer token of each inbound request.
type verifier struct {
	metadataURL string
	issuer      string
	audience    string
	client      *http.Client
	now         func() time.Time
	log         *slog.Logger
	parser      *jwt.Parser
	validate    *jwt.Validator

	mu        sync.Mutex
	keys      *oidc.RemoteKeySet
	triedAt   time.Time
	knownKids map[string]bool
	unknownAt time.Time
}

func newVerifier(metadataURL, issuer, audience string, client *http.Client, now func() time.Time, log *slog.Logger) *verifier {
	return &verifier{
		metadataURL: metadataURL, issuer: issuer, audience: audience, client: client, now: now, log: log,
		parser: jwt.NewParser(jwt.WithValidMethods(signingAlgs)),
		validate: jwt.NewValidator(jwt.WithIssuer(issuer), jwt.WithAudience(audience), jwt.WithExpirationRequired(),
			jwt.WithLeeway(tokenLeeway), jwt.WithTimeFunc(now)),
		knownKids: map[string]bool{},
	}
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
	raw = strings.TrimSpace(raw)
	tok, _, err := v.parser.ParseUnverified(raw, jwt.MapClaims{})
	if err != nil {
		return errToken{"it is not a JWT signed with an accepted algorithm"}
	}
	if !slices.Contains(signingAlgs, tok.Method.Alg()) {
		return errToken{fmt.Sprintf("its algorithm %q is not accepted", tok.Method.Alg())}
	}
	keys, err := v.keySet(ctx)
	if err != nil {
		v.log.Warn("teams: the token issuer's keys could not be fetched", "metadata", v.metadataURL, "err", err)
		return errToken{"the issuer's signing keys could not be fetched"}
	}
	kid, _ := tok.Header["kid"].(string)
	if !v.mayFetchFor(kid) {
		return errToken{"it names a signing key the issuer does not publish"}
	}
	payload, err := keys.VerifySignature(ctx, raw)
	if err != nil {
		return errToken{"its signature does not verify with the issuer's keys"}
	}
	v.mu.Lock()
	v.knownKids[kid] = true
	v.mu.Unlock()
	claims := jwt.MapClaims{}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return errToken{"its claims are not a JSON object"}
	}
	if err := v.validate.Validate(claims); err != nil {
		return errToken{claimsProblem(err)}
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

func claimsProblem(err error) string {
	switch {
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
	return "its claims are not valid"
}

// keySet returns the issuer's key set, reading the metadata first.
func (v *verifier) keySet(ctx context.Context) (*oidc.RemoteKeySet, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys != nil {
		return v.keys, nil
	}
	now := v.now()
	if !v.triedAt.IsZero() && now.Sub(v.triedAt) < rediscoverEvery {
		return nil, errors.New("the last attempt failed less than 30 seconds ago")
	}
	jwks, err := v.discover(ctx)
	if err != nil {
		v.triedAt = now
		return nil, err
	}
	v.keys = oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), v.client), jwks)
	return v.keys, nil
}

// discover reads the jwks_uri of the OpenID metadata, which must name the
// configured issuer.
func (v *verifier) discover(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.metadataURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the OpenID metadata answered %s", resp.Status)
	}
	var m struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return "", fmt.Errorf("the OpenID metadata is not JSON: %w", err)
	}
	if m.JWKSURI == "" {
		return "", errors.New("the OpenID metadata names no jwks_uri")
	}
	if m.Issuer != "" && m.Issuer != v.issuer {
		return "", fmt.Errorf("the OpenID metadata names the issuer %q, not %q (teams.issuer)", m.Issuer, v.issuer)
	}
	return m.JWKSURI, nil
}

// mayFetchFor reports whether a token naming key kid may be checked: a
// key that verified before, or an unknown one at most every 30 seconds,
// so a stream of made-up key ids cannot make the issuer's keys be fetched
// for every request.
func (v *verifier) mayFetchFor(kid string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.knownKids[kid] {
		return true
	}
	now := v.now()
	if !v.unknownAt.IsZero() && now.Sub(v.unknownAt) < rediscoverEvery {
		return false
	}
	v.unknownAt = now
	return true
}
