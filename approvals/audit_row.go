package approvals

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/countersign/countersign/kv"
)

// How an entry is stored in the audit bucket (the key is always U64(seq)).
//
// Format 1, written before binary rows: the entry as JSON
// ({"seq":…,"ts":…,…,"prev_hash":…,"hash":…[,"sig":…]}). It starts
// with '{'. Rows of this format stay where they are and are read as they
// always were.
//
// Format 2 (rowV2), written since: one version byte, then
//
//	link      4 bytes: the first 4 bytes of the previous entry's hash
//	hash      32 bytes: the entry's SHA-256 hash
//	ts        varint (zig-zag): the entry's time in Unix seconds
//	principal, user_id, agent_id, run_id, action, detail:
//	          each a uvarint length and the UTF-8 bytes as given
//
// The sequence number is the key, and the previous hash is the hash of the
// row before it (or the archive checkpoint's, or Genesis for the first):
// neither is stored twice. The link bytes only let a verifier tell a link
// broken (a row deleted, reordered or replaced before this one) from this
// row's content altered; what the chain proves does not depend on them,
// since the hash is still computed over the full previous hash and checked
// against the stored one. The hash covers the same canonical form as in
// format 1 (Entry.Canonical), so a row's hash does not depend on how it is
// stored, and an export converts rows back to format 1's JSON.
const (
	rowV2      = 0x02
	rowLinkLen = 4
	// rowHashAt is where the hash starts in a format 2 row.
	rowHashAt = 1 + rowLinkLen
)

// errRow is a stored row that is neither format.
var errRow = errors.New("audit: not an audit row")

// encodeRow appends the format 2 row of e (whose PrevHash and Hash are set,
// as Append sets them) to dst; unix is its time, whose RFC 3339 form in UTC
// is e.TS.
func encodeRow(dst []byte, e *Entry, unix int64) ([]byte, error) {
	start := len(dst)
	dst = append(dst, rowV2)
	var err error
	if len(e.PrevHash) != 64 {
		return nil, errors.New("audit: previous hash is not 64 hex characters")
	}
	if dst, err = hex.AppendDecode(dst, []byte(e.PrevHash[:2*rowLinkLen])); err != nil {
		return nil, errors.New("audit: previous hash is not hex")
	}
	dst, err = hex.AppendDecode(dst, []byte(e.Hash))
	if err != nil || len(dst)-start != rowHashAt+32 {
		return nil, errors.New("audit: hash is not 64 hex characters")
	}
	dst = binary.AppendVarint(dst, unix)
	for _, s := range [...]string{e.Principal, e.UserID, e.AgentID, e.RunID, e.Action, e.Detail} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return dst, nil
}

// decodedRow is a stored row read back: the entry (PrevHash is set only
// for a format 1 row, which stores it) and, for a format 2 row, the link
// bytes it stores.
type decodedRow struct {
	e      Entry
	binary bool
	link   [rowLinkLen]byte
}

// linksTo reports whether the row says it follows the entry whose hash is
// prev: format 1 by its stored prev_hash, format 2 by its link bytes.
func (r *decodedRow) linksTo(prev string) bool {
	if !r.binary {
		return r.e.PrevHash == prev
	}
	var want [rowLinkLen]byte
	if n, err := hex.Decode(want[:], []byte(prev[:min(len(prev), 2*rowLinkLen)])); err != nil || n != rowLinkLen {
		return false
	}
	return want == r.link
}

// decodeRow reads a stored row of either format; seq is its key's.
func decodeRow(seq uint64, v []byte) (decodedRow, error) {
	if len(v) == 0 || v[0] != rowV2 {
		var r decodedRow
		if err := json.Unmarshal(v, &r.e); err != nil {
			return decodedRow{}, err
		}
		return r, nil
	}
	if len(v) < rowHashAt+32 {
		return decodedRow{}, errRow
	}
	r := decodedRow{binary: true}
	copy(r.link[:], v[1:rowHashAt])
	r.e.Seq = seq
	r.e.Hash = hex.EncodeToString(v[rowHashAt : rowHashAt+32])
	rest := v[rowHashAt+32:]
	ts, n := binary.Varint(rest)
	if n <= 0 || n != varintLen(ts) {
		return decodedRow{}, errRow
	}
	rest = rest[n:]
	r.e.TS = time.Unix(ts, 0).UTC().Format(time.RFC3339)
	for _, f := range [...]*string{&r.e.Principal, &r.e.UserID, &r.e.AgentID, &r.e.RunID, &r.e.Action, &r.e.Detail} {
		l, n := binary.Uvarint(rest)
		if n <= 0 || n != uvarintLen(l) || l > uint64(len(rest)-n) {
			return decodedRow{}, errRow
		}
		*f = string(rest[n : n+int(l)])
		rest = rest[n+int(l):]
	}
	if len(rest) != 0 {
		return decodedRow{}, errRow
	}
	return r, nil
}

// uvarintLen and varintLen are the lengths of the shortest encodings,
// the only ones a row may hold: one entry, one row.
func uvarintLen(x uint64) int {
	var b [binary.MaxVarintLen64]byte
	return len(binary.AppendUvarint(b[:0], x))
}

func varintLen(x int64) int {
	var b [binary.MaxVarintLen64]byte
	return len(binary.AppendVarint(b[:0], x))
}

// rowHash returns the hash a stored row of either format records, without
// decoding the rest of it.
func rowHash(v []byte) (string, error) {
	if len(v) >= rowHashAt+32 && v[0] == rowV2 {
		return hex.EncodeToString(v[rowHashAt : rowHashAt+32]), nil
	}
	var e struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(v, &e); err != nil {
		return "", err
	}
	return e.Hash, nil
}

// DecodeRow reads the audit row stored under key k (U64(seq)) in either
// format: for a tool that reads the store file itself. The entry's
// PrevHash is empty for a row of the binary format, which does not store
// it (it is the hash of the row before: Export and List fill it in).
func DecodeRow(k, v []byte) (Entry, error) {
	if len(k) != 8 {
		return Entry{}, errRow
	}
	r, err := decodeRow(kv.ParseU64(k), v)
	return r.e, err
}

// prevHashOf returns the hash the entry seq follows: the stored row before
// it, the archive checkpoint's when that row was archived, or Genesis for
// the first. ok is false when none of these is at hand (a row missing).
func prevHashOf(tx kv.Tx, seq uint64) (string, bool, error) {
	if seq <= 1 {
		return Genesis, true, nil
	}
	v, err := tx.Get(bucketAudit, kv.U64(seq-1))
	if err != nil {
		return "", false, err
	}
	if v != nil {
		h, err := rowHash(v)
		return h, err == nil, nil
	}
	cp, ok, err := CheckpointOf(tx)
	if err != nil || !ok || cp.Seq != seq-1 {
		return "", false, err
	}
	return cp.Hash, true, nil
}

// exportLine appends the export form of a stored row (format 1's compact
// JSON) to dst; prev is the hash of the row before it, for a format 2 row.
func exportLine(dst []byte, seq uint64, v []byte, prev string) ([]byte, error) {
	if json.Valid(v) {
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return nil, err
		}
		return append(dst, c.Bytes()...), nil
	}
	r, err := decodeRow(seq, v)
	if err != nil {
		return nil, err
	}
	r.e.PrevHash = prev
	b, err := json.Marshal(&r.e)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}
