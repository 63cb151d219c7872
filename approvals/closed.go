package approvals

import (
	"bytes"
	"time"

	"github.com/countersign/countersign/kv"
)

// ClosedSince returns the ids of up to limit requests of kind that closed
// at or after since, earliest first, and whether more may remain (the
// retention index: no request is read).
func ClosedSince(tx kv.Tx, kind RequestKind, since time.Time, limit int) ([]string, bool, error) {
	prefix := append([]byte(kind), 0)
	from := append(bytes.Clone(prefix), kv.U64(uint64(max(since.UnixNano(), 0)))...)
	var ids []string
	more := false
	err := tx.Ascend(bucketClosed, from, kv.PrefixEnd(prefix), func(k, _ []byte) error {
		if len(ids) >= limit {
			more = true
			return kv.ErrStop
		}
		if len(k) > len(prefix)+8 {
			ids = append(ids, string(k[len(prefix)+8:]))
		}
		return nil
	})
	return ids, more, err
}
