package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot/bottest"
	"github.com/oauth2-proxy/mockoidc"
	bbolt "go.etcd.io/bbolt"
)

// The console's attacks of the security round (issue 19), each played
// against the real server on a loopback port and its real store file.

// boltCounts returns the number of keys in every bucket of the stopped
// server's bbolt file.
func (e *testEnv) boltCounts() map[string]int {
	e.t.Helper()
	skipOnPostgres(e.t, "it counts the keys of the bbolt file")
	db, err := bbolt.Open(filepath.Join(e.dir, "countersign.db"), 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int{}
	if err := db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			out[string(name)] = b.Stats().KeyN
			return nil
		})
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

var sweepRunsRE = regexp.MustCompile(`(?m)^countersign_sweeper_runs_total (\d+)`)

// waitSweeps waits until the server has begun n sweeps (its metrics).
func waitSweeps(t *testing.T, e *testEnv, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d sweeps", n), func() bool {
		_, body := webDo(t, http.DefaultClient, "GET", e.URL+"/metrics", nil)
		m := sweepRunsRE.FindStringSubmatch(body)
		if m == nil {
			return false
		}
		got, err := strconv.Atoi(m[1])
		return err == nil && got >= n
	})
}

func startMockOIDC(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

func oidcConfig(m *mockoidc.MockOIDC) string {
	return "web:\n  oidc: {issuer: " + m.Issuer() + ", client_id: " + m.ClientID + ", client_secret_env: OIDC_SECRET}\n"
}

// TestWebUnauthenticatedRequestsWriteNothing plays the store-growth attack:
// a client without a cookie sends GET /ui/signin/oidc as fast as it can
// (each used to write a 10-minute record to web_oidc), then every other
// console route a stranger can reach, with junk. The store file holds no
// more keys afterwards than after a restart with no requests at all, the
// sign-ins that got through were still started (a redirect to the
// provider), and the flood was cut by the per-client rate limit (429).
func TestWebUnauthenticatedRequestsWriteNothing(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "it counts the keys of the bbolt file")
	m := startMockOIDC(t)
	e := newTestEnv(t, "sweep:\n  schedule: \"@every 1s\"\nprincipals:\n  - {name: dr_smith, role: member, web: dr.smith@hospital.example}\n"+oidcConfig(m))
	e.env["OIDC_SECRET"] = m.ClientSecret
	e.Start()
	// Once a second sweep has begun, the first has written what a sweep
	// writes once (its indexes' markers): the baseline holds it.
	waitSweeps(t, e, 2)
	e.Stop()
	before := e.boltCounts()

	run := e.again()
	run.Start()
	stranger := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	started, limited := 0, 0
	for range 1000 {
		resp, _ := webDo(t, stranger, "GET", run.URL+"/ui/signin/oidc", nil)
		switch resp.StatusCode {
		case http.StatusFound:
			started++
		case http.StatusTooManyRequests:
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Fatalf("a 429 without Retry-After")
			}
		default:
			t.Fatalf("GET /ui/signin/oidc answered %d, want %d or %d", resp.StatusCode, http.StatusFound, http.StatusTooManyRequests)
		}
	}
	t.Logf("1000 sign-in starts from one client: %d started, %d refused", started, limited)
	if started == 0 || limited == 0 {
		t.Errorf("1000 sign-in starts from one client: %d started, %d refused with 429; want some of each (a per-client limit)", started, limited)
	}
	// Every other route a stranger reaches, with junk where it takes input.
	junk := strings.Repeat("A", 40) + "." + strings.Repeat("B", 40)
	for _, r := range []struct{ method, path string }{
		{"GET", "/ui/signin"}, {"GET", "/ui/signin/link?t=" + junk}, {"POST", "/ui/signin/link"},
		{"GET", "/ui/oidc/callback?state=s&code=c"}, {"GET", "/ui/oidc/callback?error=access_denied"},
		{"GET", "/ui/stepup?t=" + junk}, {"POST", "/ui/stepup"}, {"GET", "/ui/"}, {"GET", "/ui/items/1"},
		{"GET", "/ui/items/1/status"}, {"POST", "/ui/items/1/decide"}, {"POST", "/ui/signout"}, {"GET", "/ui/nothing"},
		{"GET", "/ui/passkeys"}, {"POST", "/ui/passkeys/begin"}, {"POST", "/ui/passkeys/register"}, {"POST", "/ui/passkeys/remove"},
		{"POST", "/ui/passkeys/signin"}, {"POST", "/ui/items/1/passkey/begin"}, {"POST", "/ui/items/1/passkey"},
	} {
		for _, cookie := range []string{"", "countersign_session=" + junk} {
			req, _ := http.NewRequest(r.method, run.URL+r.path, strings.NewReader(url.Values{"t": {junk}, "csrf": {"x"}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if cookie != "" {
				req.Header.Set("Cookie", cookie)
			}
			resp, err := stranger.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("%s %s answered %d, want below 500", r.method, r.path, resp.StatusCode)
			}
		}
	}
	run.Stop()
	after := e.boltCounts()
	for bucket, n := range after {
		if n > before[bucket] {
			t.Errorf("bucket %s grew from %d to %d keys after unauthenticated requests only; want no durable write", bucket, before[bucket], n)
		}
	}
}

// TestWebRateLimitPerClient: the console answers a client over its limit
// 429 with Retry-After, without touching a signed-in person's own limit
// from the same address, and serves the client again once tokens refill.
func TestWebRateLimitPerClient(t *testing.T) {
	t.Parallel()
	clock := bottest.NewClock(time.Now().UTC())
	e := newTestEnv(t, "principals:\n  - {name: dr_smith, role: member, web: s@x.example}\n")
	e.clock = clock.Now
	e.Start()
	person := signInHTTP(t, e, "dr_smith")
	stranger := webClient(t)
	ok, limited := 0, 0
	for range 200 {
		resp, _ := webDo(t, stranger, "GET", e.URL+"/ui/signin", nil)
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("a 429 without Retry-After")
			}
		default:
			t.Fatalf("GET /ui/signin answered %d, want %d or %d", resp.StatusCode, http.StatusOK, http.StatusTooManyRequests)
		}
	}
	if ok == 0 || limited == 0 || ok+limited != 200 {
		t.Fatalf("200 requests at one instant: %d served, %d refused; want the burst served and the rest refused", ok, limited)
	}
	if resp, _ := webDo(t, person, "GET", e.URL+"/ui/", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a signed-in person on the same address answered %d after the stranger's flood, want 200 (a bucket per session)", resp.StatusCode)
	}
	clock.Advance(time.Minute)
	if resp, _ := webDo(t, stranger, "GET", e.URL+"/ui/signin", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a minute later the client answered %d, want 200", resp.StatusCode)
	}
}

// TestWebSweepPrunesEveryExpiredRecord: far more expired sessions, used
// link nonces and abandoned OIDC records than one batch are all deleted by
// the first sweep (the one at start), and live sessions stay.
func TestWebSweepPrunesEveryExpiredRecord(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "it writes expired records into the bbolt file")
	e := newTestEnv(t, "principals:\n  - {name: dr_smith, role: member, web: s@x.example}\n")
	e.Start()
	e.Stop()
	const n = 3000
	past, future := time.Now().Add(-time.Hour).UTC(), time.Now().Add(time.Hour).UTC()
	e.withBolt(func(tx *bbolt.Tx) error {
		for _, name := range []string{"web_sessions", "web_links_used", "web_oidc"} {
			b, err := tx.CreateBucketIfNotExists([]byte(name))
			if err != nil {
				return err
			}
			for i := range n + 1 {
				exp := past
				if i == n {
					exp = future // one live record in each
				}
				var v []byte
				if name == "web_links_used" {
					v = binary.BigEndian.AppendUint64(nil, uint64(exp.Unix()))
				} else {
					v, _ = json.Marshal(map[string]any{"ref": "c:dr_smith", "expires": exp})
				}
				if err := b.Put(fmt.Appendf(nil, "k%05d", i), v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	run := e.again()
	run.Start()
	waitFor(t, "the first sweep's web step", func() bool { return strings.Contains(run.logs.String(), "step=web_sessions") })
	run.Stop()
	counts := e.boltCounts()
	for _, name := range []string{"web_sessions", "web_links_used", "web_oidc"} {
		if counts[name] != 1 {
			t.Errorf("after one sweep %s holds %d keys, want 1 (the live one; %d expired ones were all due)", name, counts[name], n)
		}
	}
}
