package approvals

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/kv"
)

// The reasons Verify gives for the first break it finds.
const (
	ReasonLink      = "chain link mismatch (a row was deleted, reordered, or inserted)"
	ReasonTampered  = "content tampered (a row's stored bytes were altered)"
	ReasonSignature = "invalid signature"
	ReasonHeadSig   = "head checkpoint signature invalid"
	ReasonHeadGone  = "head checkpoint missing (the signed checkpoint of the newest row was removed)"
	ReasonTruncated = "log truncated or rolled back (head is behind the last signed checkpoint)"
	// ReasonGenesis: the genesis record does not describe the first entry.
	ReasonGenesis = "genesis record does not match the first entry (the chain was replaced)"
	// ReasonGenesisGone: the first entry is not signed and nothing says
	// which key began the chain.
	ReasonGenesisGone = "genesis record missing (it names the key that began the chain)"
	// ReasonArchive: the archive segments and the store's checkpoint do
	// not join up, or a segment's own signatures fail.
	ReasonArchive = "the archives do not join the chain (a segment is missing, altered or out of order, or the checkpoint is not theirs)"
	// ReasonEmptied: no entries, but the store holds state or a genesis record.
	ReasonEmptied = "chain emptied (the store holds state or a genesis record, but no audit entries)"
	// ReasonRotation: a rotation entry that does not hand over from the
	// chain's current key.
	ReasonRotation = "key rotation does not follow from the chain's key"
	// ReasonUntrustedKey: entries signed by a key nobody trusted vouches for.
	ReasonUntrustedKey = "signed from here on by a key that is not trusted (neither given with --pubkey nor configured, nor handed over to a trusted key by a later rotation)"
)

// Report is the outcome of verifying the audit chain.
type Report struct {
	Intact bool `json:"intact"`
	// Entries counts the rows verified intact (all of them when Intact).
	Entries int `json:"entries"`
	// BrokenAt is the sequence number of the first break; Reason says what
	// broke there. Both are zero when Intact.
	BrokenAt uint64 `json:"broken_at,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Head is the signed checkpoint read from the store (zero if none).
	Head Checkpoint `json:"head"`
	// Anchors counts the anchors checked; NewestAnchor is the one with the
	// highest seq (zero when none were given).
	Anchors      int    `json:"anchors"`
	NewestAnchor Anchor `json:"newest_anchor,omitzero"`
	// Keys are the signing keys the chain used, as verified, oldest first.
	Keys []KeySpan `json:"keys,omitempty"`
	// Genesis is when the chain was created, from its genesis record (empty
	// for a chain created before genesis records were kept).
	Genesis string `json:"genesis,omitempty"`
	// Checkpoint is the last archived seq (zero when nothing was archived);
	// without the archives, the walk started after it.
	Checkpoint uint64 `json:"checkpoint,omitempty"`
}

// Checkpoint is the signed head of the chain: the sequence number and hash
// of the newest entry, signed over "countersign.audit.head.v1|<seq>|<hash>".
type Checkpoint struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	Sig  string `json:"sig"`
}

// VerifyOptions say what a chain is verified against.
type VerifyOptions struct {
	// Trusted are the public keys the verifier trusts: the configured
	// signing key's, or the keys pinned with --pubkey. The chain's newest
	// key must be one of them, or be handed over from one by rotation
	// entries; entries signed by keys after the last trusted one break it.
	Trusted []ed25519.PublicKey
	// Anchors are signed heads kept outside the store (ReadAnchors): each
	// must be on the chain (the same hash at its seq, signed by the chain's
	// key there) and the chain must not end before the newest.
	Anchors []Anchor
	// StateBuckets are buckets whose content is written only together with
	// audit entries: any key in them next to an empty chain breaks it.
	StateBuckets []string
	// Archives are the segments archived out of the store (ReadSegment),
	// oldest first: given them, the walk starts at the chain's first entry
	// and runs through them into the live entries; without them it starts
	// at the store's archive checkpoint.
	Archives []Segment
}

// verifyBatch is how many rows one read transaction verifies, so that a long
// chain never pins one transaction (and the file's old pages) for long.
const verifyBatch = 4096

// Verify recomputes every row of the chain, in order: the row's hash from its
// content, its link to the previous row (sequence and previous hash), and
// the signature of a row written when rows were signed; then the signed
// head checkpoint, which covers every row through the links and catches the
// deletion of the newest rows. It reports the first break. An error means the chain
// could not be read, not that it is broken. It trusts pub alone and has no
// anchors; VerifyWith says more.
func Verify(ctx context.Context, store kv.Store, pub ed25519.PublicKey) (Report, error) {
	return VerifyWith(ctx, store, VerifyOptions{Trusted: []ed25519.PublicKey{pub}})
}

// VerifyWith is Verify against the trusted keys, anchors and state buckets
// of o: the genesis record must describe the first entry, every rotation
// entry must hand over from the chain's key, the keys must end in a
// trusted one, every anchor must be on the chain, and an empty chain next
// to state (or a genesis record) is broken.
func VerifyWith(ctx context.Context, store kv.Store, o VerifyOptions) (Report, error) {
	return verifyBatched(ctx, store, o, verifyBatch)
}

// verifyBatched is VerifyWith reading batch rows a transaction.
func verifyBatched(ctx context.Context, store kv.Store, o VerifyOptions, batch int) (Report, error) {
	if len(o.Trusted) == 0 {
		return Report{}, errors.New("audit: no public key to verify with")
	}
	for _, k := range o.Trusted {
		if len(k) != ed25519.PublicKeySize {
			return Report{}, errors.New("audit: no public key to verify with")
		}
	}
	v := verifier{opts: o, prev: Genesis, want: 1, anchorsAt: map[uint64][]Anchor{}}
	for _, a := range o.Anchors {
		v.anchorsAt[a.Seq] = append(v.anchorsAt[a.Seq], a)
	}
	v.rep.Anchors = len(o.Anchors)
	v.rep.NewestAnchor, _ = Newest(o.Anchors)
	var from []byte
	first := true
	for {
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		done := false
		err := store.View(ctx, func(tx kv.Tx) error {
			if first {
				first = false
				g, ok, err := GenesisOf(tx)
				if err != nil {
					v.fail(1, ReasonGenesis)
					done = true
					return nil
				}
				if ok {
					v.genesis = &g
					v.rep.Genesis = g.Created
				}
				if !v.start(tx) {
					done = true
					return nil
				}
			}
			n := 0
			var last []byte
			err := tx.Ascend(bucketAudit, from, nil, func(k, val []byte) error {
				if n == batch {
					return kv.ErrStop
				}
				n++
				last = append(last[:0], k...)
				if !v.row(k, val) {
					return kv.ErrStop
				}
				return nil
			})
			if err != nil {
				return err
			}
			if v.broken || n < batch {
				done = true
				if !v.broken {
					return v.end(tx)
				}
				return nil
			}
			from = append(last, 0) // the smallest key after last
			return nil
		})
		if err != nil {
			return Report{}, err
		}
		if done {
			v.trust()
			v.rep.Keys = v.spans()
			return v.rep, nil
		}
	}
}

// start walks the archive segments, if any, then sets the walk up to go on
// from the store's archive checkpoint. It reports whether the walk may go on.
func (v *verifier) start(tx kv.Tx) bool {
	if !v.walkArchives() {
		return false
	}
	return v.fromCheckpoint(tx)
}

// walkArchives walks the entries of the archive segments, checking each
// segment's signed header and signed head.
func (v *verifier) walkArchives() bool {
	for _, seg := range v.opts.Archives {
		h := seg.Header
		if _, ok := verifySig(h.KeyID, h.message(), h.Sig); !ok || h.From != v.want || h.PrevHash != v.prev {
			return v.fail(h.From, ReasonArchive)
		}
		for _, raw := range seg.Entries {
			if !v.row(kv.U64(v.want), raw) {
				return false
			}
		}
		if _, ok := verifySig(h.KeyID, headMessage(seg.Head.Seq, seg.Head.Hash), seg.Head.Sig); !ok ||
			seg.Head.Seq != v.last || seg.Head.Hash != v.prev || h.To != v.last || h.LastHash != v.prev {
			return v.fail(h.To, ReasonArchive)
		}
		v.signers = append(v.signers, h.KeyID)
	}
	return true
}

// fromCheckpoint joins the walk to the store's archive checkpoint: after
// the archives, or, without them, by starting there.
func (v *verifier) fromCheckpoint(tx kv.Tx) bool {
	cp, ok, err := CheckpointOf(tx)
	if err != nil {
		return v.fail(v.want, ReasonArchive)
	}
	if !ok {
		return true
	}
	v.rep.Checkpoint = cp.Seq
	if _, good := verifySig(cp.Signer, cp.message(), cp.Sig); !good {
		return v.fail(cp.Seq, ReasonArchive)
	}
	v.signers = append(v.signers, cp.Signer)
	if len(v.opts.Archives) > 0 {
		if v.last != cp.Seq || v.prev != cp.Hash || hex.EncodeToString(v.key()) != cp.Key {
			return v.fail(v.last+1, ReasonArchive)
		}
		return true
	}
	key, err := hex.DecodeString(cp.Key)
	if err != nil || len(key) != ed25519.PublicKeySize {
		return v.fail(cp.Seq, ReasonArchive)
	}
	v.prev, v.want, v.last = cp.Hash, cp.Seq+1, cp.Seq
	v.keys, v.starts = []ed25519.PublicKey{key}, []uint64{cp.Seq + 1}
	return true
}

// verifier carries the state of one walk along the chain.
type verifier struct {
	// signers are the keys that signed archive segments and the
	// checkpoint: each must be one of the chain's keys.
	signers   []string
	opts      VerifyOptions
	anchorsAt map[uint64][]Anchor
	genesis   *GenesisRecord
	prev      string // hash of the last good row
	want      uint64 // sequence number the next row must have
	last      uint64 // sequence number of the last good row
	// keys are the chain's signing keys in order, with the seq each began
	// signing at; the last is the current one.
	keys   []ed25519.PublicKey
	starts []uint64
	broken bool
	rep    Report
}

func (v *verifier) fail(seq uint64, reason string) bool {
	v.broken = true
	v.rep.BrokenAt, v.rep.Reason = seq, reason
	return false
}

// key returns the chain's current signing key (nil before the first row).
func (v *verifier) key() ed25519.PublicKey {
	if len(v.keys) == 0 {
		return nil
	}
	return v.keys[len(v.keys)-1]
}

func (v *verifier) trusted(k ed25519.PublicKey) bool {
	for _, t := range v.opts.Trusted {
		if t.Equal(k) {
			return true
		}
	}
	return false
}

// firstKey finds the key of the first entry: the genesis record's, or for
// a chain created without one, a trusted key its signature verifies with.
func (v *verifier) firstKey(e *Entry) bool {
	if v.genesis != nil {
		pub, ok := v.genesis.verify()
		switch {
		case v.genesis.Hash != e.Hash:
			return v.fail(1, ReasonGenesis)
		case !ok:
			return v.fail(1, ReasonSignature)
		}
		v.keys, v.starts = append(v.keys, pub), append(v.starts, 1)
		return true
	}
	if e.Sig == "" {
		return v.fail(1, ReasonGenesisGone)
	}
	sig, _ := hex.DecodeString(e.Sig)
	for _, k := range v.opts.Trusted {
		if ed25519.Verify(k, entryMessage(e.Hash), sig) {
			v.keys, v.starts = append(v.keys, k), append(v.starts, 1)
			return true
		}
	}
	return v.fail(1, ReasonSignature)
}

// row checks one stored row and reports whether the walk may go on.
func (v *verifier) row(k, val []byte) bool {
	seq := v.want
	if len(k) == 8 {
		seq = kv.ParseU64(k)
	} else {
		return v.fail(seq, ReasonLink) // a key no append writes: an inserted row
	}
	r, err := decodeRow(seq, val)
	if err != nil {
		return v.fail(seq, ReasonTampered)
	}
	e := &r.e
	if r.binary {
		// The row stores no previous hash: it follows the row before,
		// which its link bytes must name, and its hash is computed over
		// that row's full hash.
		if seq != v.want || !r.linksTo(v.prev) {
			return v.fail(seq, ReasonLink)
		}
		e.PrevHash = v.prev
		if e.ComputeHash() != e.Hash {
			return v.fail(seq, ReasonTampered)
		}
	} else {
		if e.ComputeHash() != e.Hash {
			return v.fail(seq, ReasonTampered)
		}
		if e.Seq != seq || seq != v.want || e.PrevHash != v.prev {
			return v.fail(seq, ReasonLink)
		}
	}
	if seq == 1 && !v.firstKey(e) {
		return false
	}
	if e.Action == ActionKeyRotation {
		old, nk, ok := parseRotation(e.Detail)
		if !ok || !old.Equal(v.key()) {
			return v.fail(seq, ReasonRotation)
		}
		v.keys, v.starts = append(v.keys, nk), append(v.starts, seq)
	}
	if e.Sig != "" { // a row from before heads alone were signed
		sig, err := hex.DecodeString(e.Sig)
		if err != nil || !ed25519.Verify(v.key(), entryMessage(e.Hash), sig) {
			return v.fail(seq, ReasonSignature)
		}
	}
	for _, a := range v.anchorsAt[seq] {
		switch {
		case !a.signedBy(v.key()):
			return v.fail(seq, "the anchor at "+a.String()+" was not signed by the chain's key for this entry (the chain was re-signed, or the anchor forged)")
		case a.Hash != e.Hash:
			return v.fail(seq, "the entry differs from the anchor at "+a.String()+" (the chain was replaced)")
		}
	}
	v.prev, v.want, v.last = e.Hash, seq+1, seq
	v.rep.Entries++
	return true
}

// end checks, after the last row, the signed checkpoint against it, the
// anchors beyond it, and an empty chain against the store's state.
func (v *verifier) end(tx kv.Tx) error {
	h, ok, err := HeadOf(tx)
	if err != nil {
		v.fail(v.last, ReasonHeadSig)
		return nil
	}
	if ok {
		v.rep.Head = h
	}
	// An anchor beyond the chain's end: the newest entries are gone.
	var beyond *Anchor
	for _, a := range v.opts.Anchors {
		if a.Seq > v.last && (beyond == nil || a.Seq < beyond.Seq) {
			a := a
			beyond = &a
		}
	}
	if beyond != nil {
		v.fail(v.last+1, fmt.Sprintf("rolled back: the chain ends at seq %d, before the head anchored at %s", v.last, beyond))
		return nil
	}
	if !ok {
		if v.last > 0 {
			v.fail(v.last, ReasonHeadGone)
			return nil
		}
		if v.genesis != nil {
			v.fail(1, ReasonEmptied)
			return nil
		}
		for _, b := range v.opts.StateBuckets {
			if has, err := bucketHasKeys(tx, b); err != nil {
				return err
			} else if has {
				v.fail(1, ReasonEmptied)
				return nil
			}
		}
		v.rep.Intact = true
		return nil
	}
	sig, err := hex.DecodeString(h.Sig)
	switch {
	case v.last == 0:
		v.fail(1, ReasonTruncated) // a signed head, and no rows
	case err != nil || !ed25519.Verify(v.key(), headMessage(h.Seq, h.Hash), sig):
		v.fail(h.Seq, ReasonHeadSig)
	case h.Seq > v.last:
		v.fail(v.last+1, ReasonTruncated)
	case h.Seq < v.last:
		v.fail(h.Seq+1, ReasonLink) // rows after the checkpoint that no append signed
	case h.Hash != v.prev:
		v.fail(v.last, ReasonLink)
	default:
		v.rep.Intact = true
	}
	return nil
}

// trust checks that the keys the walk found end in a trusted one: a key
// is vouched for by the trusted key it was rotated to, never by itself.
// Entries signed after the last trusted key break the chain from the
// rotation that introduced the first untrusted one.
func (v *verifier) trust() {
	if len(v.keys) == 0 {
		return
	}
	for _, sg := range v.signers {
		known := false
		for _, k := range v.keys {
			known = known || hex.EncodeToString(k) == sg
		}
		if !known {
			at := v.starts[0]
			if !v.broken || at <= v.rep.BrokenAt {
				v.rep.Intact = false
				v.fail(at, ReasonArchive)
			}
			return
		}
	}
	lastTrusted := -1
	for i, k := range v.keys {
		if v.trusted(k) {
			lastTrusted = i
		}
	}
	at, reason := uint64(0), ""
	switch {
	case lastTrusted < 0:
		at, reason = v.starts[0], ReasonSignature
	case lastTrusted < len(v.keys)-1:
		at, reason = v.starts[lastTrusted+1], ReasonUntrustedKey
	default:
		return
	}
	if !v.broken || at <= v.rep.BrokenAt {
		v.rep.Intact = false
		v.fail(at, reason)
	}
}

// spans lists the keys the walk found with their seq ranges.
func (v *verifier) spans() []KeySpan {
	out := make([]KeySpan, len(v.keys))
	for i, k := range v.keys {
		to := v.last
		if i+1 < len(v.starts) {
			to = v.starts[i+1] - 1
		}
		out[i] = KeySpan{PublicKey: hex.EncodeToString(k), From: v.starts[i], To: to}
	}
	return out
}

// HeadOf reads the signed checkpoint. ok is false when the chain is empty.
func HeadOf(tx kv.Tx) (h Checkpoint, ok bool, err error) {
	b, err := tx.Get(bucketAuditHead, []byte("head"))
	if err != nil || b == nil {
		return Checkpoint{}, false, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Checkpoint{}, false, fmt.Errorf("audit head: %w", err)
	}
	return h, true, nil
}
