package slack

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"
)

// FuzzRequestSignature checks the verification the HTTP handlers run on
// every Slack request (the v0 HMAC over "v0:<timestamp>:<body>" and the
// 5-minute window): arbitrary headers never panic it; a fresh signature
// verifies; a flipped body byte, another timestamp or a truncated signature
// does not.
func FuzzRequestSignature(f *testing.F) {
	f.Add([]byte("payload=%7B%7D"), "v0=00", "1800000000", int64(0))
	f.Add([]byte(""), "", "", int64(-299))
	f.Add([]byte("x"), "v1=zz", "-1", int64(250))
	secret := "8f742231b10e8888abcd99yyyzzz85a5"
	verify := func(body []byte, ts, sig string) error {
		h := http.Header{}
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set("X-Slack-Signature", sig)
		sv, err := slackgo.NewSecretsVerifier(h, secret)
		if err != nil {
			return err
		}
		_, _ = sv.Write(body)
		return sv.Ensure()
	}
	f.Fuzz(func(t *testing.T, body []byte, rawSig, rawTS string, off int64) {
		_ = verify(body, rawTS, rawSig) // arbitrary input: no panic
		off %= 290                      // inside the window, with margin for the wall clock
		ts := strconv.FormatInt(time.Now().Unix()+off, 10)
		mac := hmac.New(sha256.New, []byte(secret))
		fmt.Fprintf(mac, "v0:%s:%s", ts, body)
		sig := "v0=" + hex.EncodeToString(mac.Sum(nil))
		if err := verify(body, ts, sig); err != nil {
			t.Fatalf("a fresh signature did not verify (%v), want it accepted", err)
		}
		if len(body) > 0 {
			b := bytes.Clone(body)
			b[len(b)/2] ^= 0x01
			if verify(b, ts, sig) == nil {
				t.Fatal("a flipped body byte verified")
			}
		}
		if verify(body, ts+"0", sig) == nil {
			t.Fatal("another timestamp verified")
		}
		if verify(body, ts, sig[:len(sig)-1]) == nil {
			t.Fatal("a truncated signature verified")
		}
	})
}
