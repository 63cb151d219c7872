package bot

import (
	"crypto/rand"
	"encoding/base64"

	"github.com/countersign/countersign/kv"
)

// bucketCallbackSecrets holds each principal's callback signing secret:
// principal id -> the secret's bytes. It is kept apart from the principal
// record so that no listing of principals can show it. Signing needs the
// secret itself, so it is stored as it is: whoever holds the store file can
// sign callbacks (docs/actions.md, "Signed callbacks").
const bucketCallbackSecrets = "callback_secrets"

// NewCallbackSecret makes a new callback signing secret for principal id,
// replacing any it had, and returns it in the Standard Webhooks form
// ("whsec_" + base64 of 32 random bytes). It is shown once: callbacks of
// the principal's requests are signed with it from the next delivery on.
func NewCallbackSecret(tx kv.Tx, id string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	if err := tx.Put(bucketCallbackSecrets, []byte(id), b[:]); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:]), nil
}

// CallbackSecretOf returns principal id's callback signing secret, or nil
// when it has none (a principal created before per-principal secrets).
func CallbackSecretOf(tx kv.Tx, id string) ([]byte, error) {
	b, err := tx.Get(bucketCallbackSecrets, []byte(id))
	if err != nil || b == nil {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// PrincipalByName returns the active (not revoked) principal called name,
// or a KindNotFound error.
func PrincipalByName(tx kv.Tx, name string) (*Principal, error) {
	ps, err := ListPrincipals(tx)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		if ps[i].Name == name && !ps[i].Revoked {
			return &ps[i], nil
		}
	}
	return nil, Errorf(KindNotFound, "no active principal is named '%s'; list_principals lists them", name)
}
