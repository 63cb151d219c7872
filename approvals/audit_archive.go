package approvals

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/countersign/countersign/kv"
)

// keyCheckpoint is the audit_head key of the archive checkpoint: the last
// archived entry, in place of the rows moved out to a segment file.
const keyCheckpoint = "checkpoint"

// ArchiveCheckpoint stands in the store for the entries archived: the last
// archived entry's seq and hash, the key that was signing the chain there,
// when, and the archiving key's signature over
// "countersign.audit.checkpoint.v1|<seq>|<hash>|<key>|<created>".
type ArchiveCheckpoint struct {
	Seq     uint64 `json:"seq"`
	Hash    string `json:"hash"`
	Key     string `json:"key"` // hex key signing the chain at Seq
	Created string `json:"created"`
	Signer  string `json:"signer"` // hex key that signed this checkpoint
	Sig     string `json:"sig"`
}

func (c ArchiveCheckpoint) message() []byte {
	return []byte("countersign.audit.checkpoint.v1|" + strconv.FormatUint(c.Seq, 10) + "|" + c.Hash + "|" + c.Key + "|" + c.Created)
}

// SegmentHeader is the first line of an archive segment file
// ({"segment":{…}}): the entries From..To, the hash before the first
// (PrevHash), the first and last hashes, and the archiving key's signature
// over "countersign.audit.segment.v1|<from>|<to>|<prev>|<first>|<last>|<created>".
// The entries follow, one a line, then the signed head at To
// ({"head":{…}}), which covers them through their links.
type SegmentHeader struct {
	From      uint64 `json:"from"`
	To        uint64 `json:"to"`
	PrevHash  string `json:"prev_hash"`
	FirstHash string `json:"first_hash"`
	LastHash  string `json:"last_hash"`
	Created   string `json:"created"`
	KeyID     string `json:"key_id"`
	Sig       string `json:"sig"`
	// Genesis is the chain's genesis record, in the segment that starts at
	// the first entry, so that the segment verifies on its own.
	Genesis *GenesisRecord `json:"genesis,omitempty"`
}

func (h SegmentHeader) message() []byte {
	return []byte(fmt.Sprintf("countersign.audit.segment.v1|%d|%d|%s|%s|%s|%s", h.From, h.To, h.PrevHash, h.FirstHash, h.LastHash, h.Created))
}

// CheckpointOf reads the archive checkpoint; ok is false when nothing was
// ever archived.
func CheckpointOf(tx kv.Tx) (c ArchiveCheckpoint, ok bool, err error) {
	b, err := tx.Get(bucketAuditHead, []byte(keyCheckpoint))
	if err != nil || b == nil {
		return ArchiveCheckpoint{}, false, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return ArchiveCheckpoint{}, true, fmt.Errorf("audit checkpoint: %w", err)
	}
	return c, true, nil
}

func verifySig(keyHex string, msg []byte, sigHex string) (ed25519.PublicKey, bool) {
	pub, err := hex.DecodeString(keyHex)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, false
	}
	sig, err := hex.DecodeString(sigHex)
	return pub, err == nil && ed25519.Verify(pub, msg, sig)
}

// SyncWriter is a file an archive is written to: synced before the store
// lets go of the entries.
type SyncWriter interface {
	io.Writer
	Sync() error
}

// ArchiveResult says what Archive moved out.
type ArchiveResult struct {
	Segment    SegmentHeader
	Checkpoint ArchiveCheckpoint
}

// ErrNothingToArchive is returned when no live entry is older than the
// date (the newest entry always stays live: the head names it).
var ErrNothingToArchive = errors.New("no live entry is older than that date (the newest entry always stays in the store)")

// Archive moves the live entries older than before (all but the newest)
// out of the store into a segment written to out: it verifies the chain
// first (o: the keys, anchors and state buckets to verify against; it never
// archives a broken chain), writes and syncs the segment, then in one
// transaction deletes the entries and puts a checkpoint signed by key in
// their place. Verification then starts from the checkpoint, and covers the
// whole history given the segments.
func Archive(ctx context.Context, store kv.Store, key ed25519.PrivateKey, o VerifyOptions, before, now time.Time, out SyncWriter) (ArchiveResult, error) {
	rep, err := VerifyWith(ctx, store, o)
	if err != nil {
		return ArchiveResult{}, err
	}
	if !rep.Intact {
		return ArchiveResult{}, fmt.Errorf("the audit chain is BROKEN at seq %d (%s); it is not archived", rep.BrokenAt, rep.Reason)
	}
	pub := key.Public().(ed25519.PublicKey)
	cutoff := before.UTC().Format(time.RFC3339)
	created := now.UTC().Truncate(time.Second).Format(time.RFC3339)
	var seg SegmentHeader
	var rows [][]byte
	var users []string
	var head Checkpoint
	var prevCP ArchiveCheckpoint
	var hadCP bool
	err = store.View(ctx, func(tx kv.Tx) error {
		var ok bool
		if head, ok, err = HeadOf(tx); err != nil || !ok {
			return err
		}
		if prevCP, hadCP, err = CheckpointOf(tx); err != nil {
			return err
		}
		seg.PrevHash = Genesis
		if hadCP {
			seg.PrevHash = prevCP.Hash
		} else if g, ok, err := GenesisOf(tx); err != nil {
			return err
		} else if ok {
			seg.Genesis = &g
		}
		prev := seg.PrevHash
		return tx.Ascend(bucketAudit, nil, kv.U64(head.Seq), func(k, v []byte) error {
			r, err := decodeRow(kv.ParseU64(k), v)
			if err != nil {
				return err
			}
			e := &r.e
			if e.TS >= cutoff {
				return kv.ErrStop
			}
			if seg.From == 0 {
				seg.From, seg.FirstHash = e.Seq, e.Hash
			}
			seg.To, seg.LastHash = e.Seq, e.Hash
			line, err := exportLine(nil, e.Seq, v, prev) // the segment holds format 1's JSON
			if err != nil {
				return err
			}
			prev = e.Hash
			rows = append(rows, line)
			users = append(users, e.UserID)
			return nil
		})
	})
	if err != nil {
		return ArchiveResult{}, err
	}
	if seg.From == 0 {
		return ArchiveResult{}, ErrNothingToArchive
	}
	// The key signing the chain at the last archived entry.
	var atTo string
	for _, k := range rep.Keys {
		if k.From <= seg.To {
			atTo = k.PublicKey
		}
	}
	if !ed25519.PublicKey(mustHex(rep.Keys[len(rep.Keys)-1].PublicKey)).Equal(pub) {
		return ArchiveResult{}, errors.New("the signing key is not the key that signs the chain's head")
	}
	seg.Created, seg.KeyID = created, hex.EncodeToString(pub)
	seg.Sig = hex.EncodeToString(ed25519.Sign(key, seg.message()))
	bw := bufio.NewWriter(out)
	hb, _ := json.Marshal(struct {
		Segment SegmentHeader `json:"segment"`
	}{seg})
	bw.Write(append(hb, '\n'))
	for _, r := range rows {
		bw.Write(append(r, '\n'))
	}
	tb, _ := json.Marshal(ExportedHead{Head: Checkpoint(signHead(key, seg.To, seg.LastHash))})
	bw.Write(append(tb, '\n'))
	if err := bw.Flush(); err != nil {
		return ArchiveResult{}, fmt.Errorf("--out: %w", err)
	}
	if err := out.Sync(); err != nil {
		return ArchiveResult{}, fmt.Errorf("--out: %w", err)
	}
	cp := ArchiveCheckpoint{Seq: seg.To, Hash: seg.LastHash, Key: atTo, Created: created, Signer: hex.EncodeToString(pub)}
	cp.Sig = hex.EncodeToString(ed25519.Sign(key, cp.message()))
	err = store.Update(ctx, func(tx kv.Tx) error {
		h, _, err := HeadOf(tx)
		if err != nil {
			return err
		}
		c, ok, err := CheckpointOf(tx)
		if err != nil {
			return err
		}
		if h != head || ok != hadCP || c != prevCP {
			return errors.New("the chain moved while it was archived; stop the server and run again")
		}
		for i, s := uint64(0), seg.From; s <= seg.To; i, s = i+1, s+1 {
			if err := tx.Delete(bucketAudit, kv.U64(s)); err != nil {
				return err
			}
			if users[i] != "" {
				if err := tx.Delete(bucketAuditUser, userIndexKey(users[i], s)); err != nil {
					return err
				}
			}
		}
		b, _ := json.Marshal(cp)
		return tx.Put(bucketAuditHead, []byte(keyCheckpoint), b)
	})
	if err != nil {
		return ArchiveResult{}, err
	}
	return ArchiveResult{Segment: seg, Checkpoint: cp}, nil
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// Segment is one archive segment file, read by ReadSegment.
type Segment struct {
	Name    string
	Header  SegmentHeader
	Entries [][]byte // as stored
	Head    Checkpoint
}

// ReadSegment reads an archive segment file (name is for messages). It
// checks the form, not the chain: VerifyWith walks the entries.
func ReadSegment(r io.Reader, name string) (Segment, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	s := Segment{Name: name}
	line := 0
	gotHead := false
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if gotHead {
			return Segment{}, fmt.Errorf("archive %s, line %d: a line after the segment's signed head", name, line)
		}
		switch {
		case line == 1:
			var h struct {
				Segment *SegmentHeader `json:"segment"`
			}
			if json.Unmarshal(b, &h) != nil || h.Segment == nil {
				return Segment{}, fmt.Errorf("archive %s: line 1 is not a segment header; is this a `countersign audit archive` file?", name)
			}
			s.Header = *h.Segment
		case bytes.HasPrefix(b, []byte(`{"head":`)):
			var h ExportedHead
			if err := json.Unmarshal(b, &h); err != nil {
				return Segment{}, fmt.Errorf("archive %s, line %d: not a signed head", name, line)
			}
			s.Head, gotHead = h.Head, true
		default:
			s.Entries = append(s.Entries, append([]byte(nil), b...))
		}
	}
	if err := sc.Err(); err != nil {
		return Segment{}, fmt.Errorf("archive %s: %w", name, err)
	}
	if !gotHead {
		return Segment{}, fmt.Errorf("archive %s: no signed head at the end (the file was cut short)", name)
	}
	return s, nil
}
