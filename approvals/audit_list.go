package approvals

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	"github.com/countersign/countersign/kv"
)

// Filter selects audit entries for List. An empty field matches anything.
type Filter struct {
	UserID  string
	AgentID string
	RunID   string
	// Before, when not zero, lists only entries with a smaller sequence
	// number (the cursor of the next page).
	Before uint64
	// Limit is the most entries returned; it must be positive.
	Limit int
}

func (f Filter) match(e Entry) bool {
	return (f.UserID == "" || e.UserID == f.UserID) &&
		(f.AgentID == "" || e.AgentID == f.AgentID) &&
		(f.RunID == "" || e.RunID == f.RunID)
}

func userIndexKey(userID string, seq uint64) []byte {
	return kv.Join([]byte(userID), kv.U64(seq))
}

// List returns up to f.Limit entries matching f, newest first. A filter on
// UserID walks that space's index, so one space's trail is read without
// scanning the whole deployment's.
func List(tx kv.Tx, f Filter) ([]Entry, error) {
	if f.Limit <= 0 {
		return nil, nil
	}
	var out []Entry
	add := func(seq uint64, v []byte) error {
		r, err := decodeRow(seq, v)
		if err != nil {
			return nil // an unreadable row is Verify's to report, not the listing's
		}
		if f.match(r.e) {
			if r.binary { // the previous hash is the row before's
				prev, _, err := prevHashOf(tx, seq)
				if err != nil {
					return err
				}
				r.e.PrevHash = prev
			}
			out = append(out, r.e)
			if len(out) >= f.Limit {
				return kv.ErrStop
			}
		}
		return nil
	}
	var to []byte
	if f.Before > 0 {
		to = kv.U64(f.Before)
	}
	if f.UserID == "" {
		err := tx.Descend(bucketAudit, nil, to, func(k, v []byte) error {
			if len(k) != 8 {
				return nil
			}
			return add(kv.ParseU64(k), v)
		})
		return out, err
	}
	prefix := append([]byte(f.UserID), 0)
	end := kv.PrefixEnd(prefix)
	if f.Before > 0 {
		end = userIndexKey(f.UserID, f.Before)
	}
	err := tx.Descend(bucketAuditUser, prefix, end, func(k, _ []byte) error {
		if len(k) != len(prefix)+8 {
			return nil
		}
		seq := k[len(prefix):] // the value, when there is one, repeats it
		v, err := tx.Get(bucketAudit, seq)
		if err != nil || v == nil {
			return err
		}
		return add(kv.ParseU64(seq), v)
	})
	return out, err
}

// Export writes every stored row, oldest first, as JSON Lines: one entry a
// line, as JSON (a row stored as JSON compacted, a binary row converted,
// its prev_hash being the hash of the row before it), after, when older entries were
// archived, the checkpoint they left ({"checkpoint":{…}}), and then the
// signed head as its last line, {"head":{"seq":N,"hash":"…","sig":"…"}}, so that an exported chain
// verifies offline with the public key alone (the head's signature covers
// every row through the hash links). A row that is not valid JSON is
// written as {"seq":N,"invalid_row_base64":"..."} rather than dropped. It
// reads in batches and returns how many rows it wrote.
func Export(ctx context.Context, store kv.Store, w io.Writer) (int, error) {
	return exportBatched(ctx, store, w, verifyBatch)
}

// exportBatched is Export reading batch rows a transaction.
func exportBatched(ctx context.Context, store kv.Store, w io.Writer, batch int) (int, error) {
	bw := bufio.NewWriter(w)
	n := 0
	var from, line []byte
	// prev is the hash of the row exported last: a binary row's prev_hash.
	var prev string
	havePrev := false
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		got := 0
		var last []byte
		err := store.View(ctx, func(tx kv.Tx) error {
			if from == nil { // the first batch: where the live chain starts
				if cp, ok, err := CheckpointOf(tx); err != nil {
					return err
				} else if ok {
					b, _ := json.Marshal(struct {
						Checkpoint ArchiveCheckpoint `json:"checkpoint"`
					}{cp})
					if _, err := bw.Write(append(b, '\n')); err != nil {
						return err
					}
				}
			}
			err := tx.Ascend(bucketAudit, from, nil, func(k, v []byte) error {
				if got == batch {
					return kv.ErrStop
				}
				got++
				last = append(last[:0], k...)
				seq := kv.ParseU64(k)
				if !havePrev { // the first row: what it follows
					var err error
					if prev, _, err = prevHashOf(tx, seq); err != nil {
						return err
					}
					havePrev = true
				}
				line, err := exportLine(line[:0], seq, v, prev)
				if err != nil {
					line = fmt.Appendf(line[:0], `{"seq":%d,"invalid_row_base64":%q}`, seq, base64.StdEncoding.EncodeToString(v))
				}
				prev, _ = rowHash(v)
				line = append(line, '\n')
				if _, err := bw.Write(line); err != nil {
					return err
				}
				n++
				return nil
			})
			if err != nil || got == batch {
				return err
			}
			// The last batch: the head of the same snapshot.
			h, ok, err := HeadOf(tx)
			if err != nil || !ok {
				return err
			}
			b, err := json.Marshal(ExportedHead{Head: h})
			if err != nil {
				return err
			}
			_, err = bw.Write(append(b, '\n'))
			return err
		})
		if err != nil {
			return n, err
		}
		if got < batch {
			return n, bw.Flush()
		}
		from = append(last, 0)
	}
}

// ExportedHead is the last line of an export: the signed head.
type ExportedHead struct {
	Head Checkpoint `json:"head"`
}
