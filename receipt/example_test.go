package receipt_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/receipt"
)

// An agent runtime that was handed a receipt checks it offline, with the
// deployment's public key, before running the call: the signature, the
// expiry, and that it approves exactly the call about to run.
func ExampleVerify() {
	pub, priv, _ := ed25519.GenerateKey(nil)
	args := []byte(`{"db_name": "staging", "force": false}`)
	sum, _ := receipt.ArgsHash("delete_database", args)
	issued := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r, _ := receipt.Sign(receipt.Payload{
		V: receipt.Version, Key: receipt.KeyID(pub),
		RequestID: "req_7", Tool: "delete_database", ApprovedArgsSHA256: sum,
		ConfirmedBy: "dr_smith [prin_1]",
		IssuedAt:    issued.Unix(), ExpiresAt: issued.Add(15 * time.Minute).Unix(),
	}, func(msg []byte) []byte { return ed25519.Sign(priv, msg) })

	p, err := receipt.Verify(r, pub, issued.Add(time.Minute))
	fmt.Println(err, p.RequestID, p.ConfirmedBy)

	// The same arguments with other whitespace or key order hash alike;
	// other arguments do not.
	same, _ := receipt.ArgsHash("delete_database", []byte(`{"force":false,"db_name":"staging"}`))
	other, _ := receipt.ArgsHash("delete_database", []byte(`{"db_name":"prod","force":false}`))
	fmt.Println(same == p.ApprovedArgsSHA256, other == p.ApprovedArgsSHA256)

	// Too late, or another deployment's key: refused.
	_, err = receipt.Verify(r, pub, issued.Add(time.Hour))
	fmt.Println(errors.Is(err, receipt.ErrExpired))
	otherPub, _, _ := ed25519.GenerateKey(nil)
	_, err = receipt.Verify(r, otherPub, issued.Add(time.Minute))
	fmt.Println(errors.Is(err, receipt.ErrSignature))
	// Output:
	// <nil> req_7 dr_smith [prin_1]
	// true false
	// true
	// true
}

// Canonical is the form ArgsHash hashes: sorted keys, no insignificant
// whitespace.
func ExampleCanonical() {
	c, _ := receipt.Canonical([]byte(`{ "b": [1, 2], "a": {"y": true, "x": null} }`))
	fmt.Println(string(c))
	// Output: {"a":{"x":null,"y":true},"b":[1,2]}
}
