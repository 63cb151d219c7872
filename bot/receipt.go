package bot

import (
	"crypto/ed25519"

	"github.com/countersign/countersign/receipt"
)

// SignReceipt signs p as an action receipt with the audit signing key (the
// receipt package's format, whose domain-separation prefix keeps a receipt
// from ever being mistaken for another signed message). Key is set to this
// deployment's key id.
func (b *Bot) SignReceipt(p receipt.Payload) (string, error) {
	p.Key = receipt.KeyID(b.PublicKey())
	return receipt.Sign(p, func(msg []byte) []byte { return ed25519.Sign(b.key, msg) })
}

// ArgsHash is the SHA-256 an approval names for tool's arguments
// (args_sha256, approved_args_sha256): over the tool's name and the
// arguments' canonical JSON. A surface that runs an approved call checks
// the bytes it is about to run against it.
func ArgsHash(tool string, args []byte) (string, error) { return receipt.ArgsHash(tool, args) }
