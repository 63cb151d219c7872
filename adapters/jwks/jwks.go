// Package jwks is the one JSON Web Key Set verifier of Countersign's
// inbound token checks (the MCP OAuth resource server, adapters/oauth;
// the Teams messaging endpoint, adapters/teams): the issuer's public
// signing keys, fetched from its JWKS (parsed by go-jose) and cached by
// key id, for golang-jwt's key lookup.
//
// What it guards against: a token is checked against the cached keys;
// one naming a key id the cache does not hold (an issuer's key rotation,
// or a forgery with a made-up kid) makes the keys be fetched again, but
// at most once per MinInterval, whatever the tokens name, so a stream of
// forged tokens with random key ids costs the issuer at most one request
// per interval. A token whose signature fails with a cached key fetches
// nothing. Keys older than MaxAge are fetched again at the next token, so
// a key the issuer withdrew stops being accepted; while the issuer cannot
// be reached the cached keys stand.
//
// It imports nothing of Countersign: any adapter that checks a JWT may
// use it.
package jwks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// The defaults of Options.
const (
	// DefaultMinInterval is the least time between two fetches.
	DefaultMinInterval = 30 * time.Second
	// DefaultMaxAge is how long fetched keys are used before the next
	// token makes them be fetched again.
	DefaultMaxAge = 24 * time.Hour
	// fetchTimeout bounds one fetch (locating the set and reading it).
	fetchTimeout = 10 * time.Second
	// maxBody bounds a JWKS or metadata document.
	maxBody = 1 << 20
)

// ErrUnknownKey is the refusal of a key id the issuer does not publish.
var ErrUnknownKey = errors.New("it names a signing key the issuer does not publish")

// ErrUnavailable wraps a failed fetch when no cached key can stand in:
// the token cannot be checked now.
var ErrUnavailable = errors.New("the issuer's signing keys could not be fetched")

// Options configure New.
type Options struct {
	// Locate returns the URL of the key set: a fixed URL, or the
	// jwks_uri read from the issuer's metadata (checked by the caller).
	// It is called at each fetch, so a moved key set is followed.
	Locate func(ctx context.Context) (string, error)
	// HTTPClient fetches the keys (nil: a client with a 10-second
	// timeout).
	HTTPClient *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// MinInterval is the least time between two fetches (0:
	// DefaultMinInterval).
	MinInterval time.Duration
	// MaxAge is how long fetched keys are used (0: DefaultMaxAge).
	MaxAge time.Duration
	// Logger takes a warning when a fetch fails (nil: discarded).
	Logger *slog.Logger
}

// Keys are an issuer's signing keys, cached.
type Keys struct {
	o Options

	mu        sync.Mutex
	keys      map[string]any // key id → public key
	fetchedAt time.Time      // the last fetch that succeeded
	triedAt   time.Time      // the last fetch, whatever came of it
}

// New returns the keys located by o.Locate, fetched at the first token.
func New(o Options) (*Keys, error) {
	if o.Locate == nil {
		return nil, errors.New("jwks: Locate is required")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: fetchTimeout}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Keys{o: o}, nil
}

// URL is a Locate for a key set at a fixed URL.
func URL(u string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return u, nil }
}

// Keyfunc is the key lookup of golang-jwt's parser: the key the token's
// kid header names (Key). golang-jwt then checks that the key's type is
// the header's algorithm's.
func (k *Keys) Keyfunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return k.Key(ctx, kid)
	}
}

// Key returns the issuer's public key kid: from the cache while it is
// younger than MaxAge; otherwise the keys are fetched again, at most once
// per MinInterval. ErrUnknownKey when the issuer does not publish kid;
// ErrUnavailable (wrapped) when the keys could not be fetched and none is
// cached. A token without a kid takes the issuer's only key, if it has
// one key.
func (k *Keys) Key(ctx context.Context, kid string) (any, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.o.Now()
	key, ok := lookup(k.keys, kid)
	if ok && now.Sub(k.fetchedAt) < k.o.MaxAge {
		return key, nil
	}
	if !k.triedAt.IsZero() && now.Sub(k.triedAt) < k.o.MinInterval {
		switch {
		case ok:
			return key, nil // older than MaxAge: until the next fetch
		case k.fetchedAt.IsZero() || k.fetchedAt.Before(k.triedAt):
			return nil, fmt.Errorf("%w: the last attempt failed less than %s ago", ErrUnavailable, k.o.MinInterval)
		}
		return nil, ErrUnknownKey
	}
	k.triedAt = now
	keys, err := k.fetch(ctx)
	if err != nil {
		k.o.Logger.Warn("jwks: the issuer's signing keys could not be fetched", "err", err)
		if ok {
			return key, nil // the cached key, until the issuer answers again
		}
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	k.keys, k.fetchedAt = keys, now
	if key, ok := lookup(keys, kid); ok {
		return key, nil
	}
	return nil, ErrUnknownKey
}

// lookup finds kid in keys; "" finds the only key of a set of one.
func lookup(keys map[string]any, kid string) (any, bool) {
	if key, ok := keys[kid]; ok {
		return key, true
	}
	if kid == "" && len(keys) == 1 {
		for _, key := range keys {
			return key, true
		}
	}
	return nil, false
}

// fetch locates the key set and reads its signing keys.
func (k *Keys) fetch(ctx context.Context) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	u, err := k.o.Locate(ctx)
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	if err := GetJSON(ctx, k.o.HTTPClient, u, &set); err != nil {
		return nil, fmt.Errorf("the JWKS %s: %w", u, err)
	}
	keys := map[string]any{}
	for _, jk := range set.Keys {
		if jk.Use != "" && jk.Use != "sig" {
			continue
		}
		if pub := jk.Public(); pub.Valid() && pub.Key != nil {
			keys[jk.KeyID] = pub.Key
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the JWKS %s holds no signing key", u)
	}
	return keys, nil
}

// GetJSON GETs url with client and decodes its JSON answer into out: a
// 200 of at most a megabyte, else an error saying what came back.
func GetJSON(ctx context.Context, client *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return json.Unmarshal(body, out)
}
