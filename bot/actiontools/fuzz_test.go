package actiontools

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// FuzzCallbackVerify checks the receiver's verification of signed
// callbacks (Standard Webhooks): arbitrary headers never panic it; a
// signature it made verifies; and any change to the body, id or timestamp,
// or a truncated signature, does not.
func FuzzCallbackVerify(f *testing.F) {
	f.Add([]byte(`{"status":"approved"}`), "msg_1", int64(0), "v1,AAAA", "1800000000")
	f.Add([]byte(""), "a", int64(300), "v1a,xyz v1,", "-1")
	f.Add([]byte("x"), "m.d", int64(-301), "", "99999999999999999999")
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, body []byte, id string, off int64, rawSig, rawTS string) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, rawTS)
		h.Set(HeaderSignature, rawSig)
		_ = Verify(secret, h, body, now, 0) // arbitrary input: no panic
		off %= 600
		ts := now.Unix() + off
		sig := Sign(secret, id, ts, body)
		good := http.Header{}
		good.Set(HeaderID, id)
		good.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		good.Set(HeaderSignature, sig)
		err := Verify(secret, good, body, now, 0)
		inWindow := off >= -300 && off <= 300
		if id != "" && good.Get(HeaderID) == id && inWindow && err != nil {
			t.Fatalf("a fresh signature did not verify: %v", err)
		}
		if !inWindow && err == nil {
			t.Fatalf("a signature %d s off verified, want it refused", off)
		}
		if err != nil {
			return
		}
		mutated := append(bytes.Clone(body), 'x')
		if Verify(secret, good, mutated, now, 0) == nil {
			t.Fatal("a changed body verified")
		}
		trunc := good.Clone()
		trunc.Set(HeaderSignature, sig[:len(sig)-1])
		if Verify(secret, trunc, body, now, 0) == nil {
			t.Fatal("a truncated signature verified")
		}
	})
}
