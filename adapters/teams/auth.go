package teams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// The inbound token check: the claims and the header's algorithm through
// golang-jwt, the issuer's keys (its JWKS, parsed by go-jose) found from
// its OpenID metadata and cached by key id. A token naming a key id the
// cache does not hold makes the keys be fetched again (the Bot
// Framework's rotation), at most every 30 seconds; a token whose
// signature fails with a cached key fetches nothing, so a stream of
// forged tokens costs the issuer no request and cannot hold up the next
// genuine one. The Bot Framework publishes metadata whose issuer is not
// its URL's prefix, so the metadata is read here for its jwks_uri (and
// its issuer checked against the configured one).

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

// refreshKeysEvery is how old the cached keys may grow before a token
// makes them be fetched again, so that a key the issuer withdrew stops
// being accepted.
const refreshKeysEvery = 24 * time.Hour

// verifier checks the bearer token of each inbound request.
type verifier struct {
	metadataURL string
	issuer      string
	audience    string
	client      *http.Client
	now         func() time.Time
	log         *slog.Logger
	parser      *jwt.Parser

	mu        sync.Mutex
	keys      map[string]any // key id → public key
	fetchedAt time.Time      // the last fetch that succeeded
	triedAt   time.Time      // the last fetch, whatever came of it
}

func newVerifier(metadataURL, issuer, audience string, client *http.Client, now func() time.Time, log *slog.Logger) *verifier {
	return &verifier{
		metadataURL: metadataURL, issuer: issuer, audience: audience, client: client, now: now, log: log,
		parser: jwt.NewParser(jwt.WithValidMethods(signingAlgs), jwt.WithIssuer(issuer), jwt.WithAudience(audience),
			jwt.WithExpirationRequired(), jwt.WithLeeway(tokenLeeway), jwt.WithTimeFunc(now)),
	}
}

// errToken is a refused token; its text is safe to answer with.
type errToken struct{ why string }

func (e errToken) Error() string { return "the request's token was refused: " + e.why }

// errUnknownKey is the key lookup's refusal of a key id the issuer does
// not publish.
var errUnknownKey = errors.New("it names a signing key the issuer does not publish")

// check verifies the Authorization header of a request claiming to come
// from serviceURL: signature, algorithm, issuer, audience, expiry, and the
// serviceurl claim naming the same service URL.
func (v *verifier) check(ctx context.Context, authorization, serviceURL string) error {
	raw, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || strings.TrimSpace(raw) == "" {
		return errToken{"no bearer token (Authorization: Bearer …)"}
	}
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(strings.TrimSpace(raw), claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(ctx, kid)
	})
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
	case errors.Is(err, errUnknownKey):
		return errUnknownKey.Error()
	case errors.Is(err, jwt.ErrTokenUnverifiable):
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

// key returns the issuer's public key kid, fetching the keys again when
// the cache lacks it or is a day old, at most every 30 seconds.
func (v *verifier) key(ctx context.Context, kid string) (any, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	k, ok := v.keys[kid]
	if ok && now.Sub(v.fetchedAt) < refreshKeysEvery {
		return k, nil
	}
	if !v.triedAt.IsZero() && now.Sub(v.triedAt) < rediscoverEvery {
		if ok {
			return k, nil
		}
		return nil, errUnknownKey
	}
	v.triedAt = now
	keys, err := v.fetch(ctx)
	if err != nil {
		v.log.Warn("teams: the token issuer's keys could not be fetched", "metadata", v.metadataURL, "err", err)
		if ok {
			return k, nil // the cached key, until the issuer answers again
		}
		return nil, err
	}
	v.keys, v.fetchedAt = keys, now
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, errUnknownKey
}

// fetch reads the metadata's jwks_uri and the signing keys there.
func (v *verifier) fetch(ctx context.Context) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var m struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.getJSON(ctx, v.metadataURL, &m); err != nil {
		return nil, fmt.Errorf("the OpenID metadata: %w", err)
	}
	if m.JWKSURI == "" {
		return nil, errors.New("the OpenID metadata names no jwks_uri")
	}
	if m.Issuer != "" && m.Issuer != v.issuer {
		return nil, fmt.Errorf("the OpenID metadata names the issuer %q, not %q (teams.issuer)", m.Issuer, v.issuer)
	}
	var set jose.JSONWebKeySet
	if err := v.getJSON(ctx, m.JWKSURI, &set); err != nil {
		return nil, fmt.Errorf("the JWKS: %w", err)
	}
	keys := map[string]any{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if pub := k.Public(); pub.Valid() && pub.Key != nil {
			keys[k.KeyID] = pub.Key
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the JWKS holds no signing key")
	}
	return keys, nil
}

func (v *verifier) getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return json.Unmarshal(body, out)
}
