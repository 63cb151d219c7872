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
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign/kv"
)

// Anchor is a signed head written outside the store (one JSON line of the
// anchor file): the chain had the entry Hash at Seq at Time, signed by the
// key KeyID (the hex Ed25519 public key) over
// "countersign.audit.anchor.v1|<seq>|<hash>|<time>". A rollback, a
// truncation or a replaced chain disagrees with an anchor written before it.
type Anchor struct {
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
	Time  string `json:"time"` // RFC 3339, UTC
	KeyID string `json:"key_id"`
	Sig   string `json:"sig"`
	// Line is the anchor's line in its file (1-based; not stored).
	Line int `json:"-"`
}

func anchorMessage(seq uint64, hash, at string) []byte {
	return []byte("countersign.audit.anchor.v1|" + strconv.FormatUint(seq, 10) + "|" + hash + "|" + at)
}

// SignAnchor signs the head (seq, hash) as anchored at now.
func SignAnchor(key ed25519.PrivateKey, seq uint64, hash string, now time.Time) Anchor {
	at := now.UTC().Truncate(time.Second).Format(time.RFC3339)
	return Anchor{Seq: seq, Hash: hash, Time: at,
		KeyID: hex.EncodeToString(key.Public().(ed25519.PublicKey)),
		Sig:   hex.EncodeToString(ed25519.Sign(key, anchorMessage(seq, hash, at)))}
}

// signedBy reports whether the anchor names pub and is signed by it.
func (a Anchor) signedBy(pub ed25519.PublicKey) bool {
	if a.KeyID != hex.EncodeToString(pub) {
		return false
	}
	sig, err := hex.DecodeString(a.Sig)
	return err == nil && ed25519.Verify(pub, anchorMessage(a.Seq, a.Hash, a.Time), sig)
}

// String names the anchor for a report: its line, seq, hash and time.
func (a Anchor) String() string {
	h := a.Hash
	if len(h) > 16 {
		h = h[:16] + "…"
	}
	where := fmt.Sprintf("line %d of the anchor file", a.Line)
	if a.Line == 0 {
		where = "the last line of the anchor file"
	}
	return fmt.Sprintf("%s (seq %d, hash %s, anchored %s)", where, a.Seq, h, a.Time)
}

// anchorTail is how much of an anchor file's end ReadLastAnchor reads:
// many lines of about 250 bytes.
const anchorTail = 64 << 10

// ReadLastAnchor reads the last anchor of the file at path, from its end
// only (a stream appended for years is not read whole every minute), and
// false when the file holds none. Its Line is 0. A missing file is an
// error wrapping os.ErrNotExist; a last line that is not an anchor is an
// error. ReadAnchors checks every line.
func ReadLastAnchor(path string) (Anchor, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return Anchor{}, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Anchor{}, false, err
	}
	off := max(st.Size()-anchorTail, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return Anchor{}, false, fmt.Errorf("anchor file %s: %w", path, err)
	}
	if off > 0 {
		// The first line may be cut: start after it.
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	lines := bytes.Split(bytes.TrimSpace(buf), []byte("\n"))
	last := lines[len(lines)-1]
	if len(last) == 0 {
		return Anchor{}, false, nil
	}
	as, err := parseAnchors(bytes.NewReader(last), path)
	if err != nil {
		return Anchor{}, false, fmt.Errorf("anchor file %s, last line: not an anchor; an anchor file is only ever appended to, so find out who wrote it", path)
	}
	as[0].Line = 0
	return as[0], true, nil
}

// ReadAnchors reads an anchor file. A missing file is an error wrapping
// os.ErrNotExist. Every non-empty line must be an anchor: a line that is not
// is an error naming it (an anchor file is only ever appended to, so a
// line that does not parse means someone wrote to it).
func ReadAnchors(path string) ([]Anchor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseAnchors(f, path)
}

func parseAnchors(r io.Reader, path string) ([]Anchor, error) {
	var out []Anchor
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var a Anchor
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil || a.Seq == 0 || len(a.Hash) != 64 || a.Sig == "" || a.KeyID == "" {
			return nil, fmt.Errorf("anchor file %s, line %d: not an anchor (want {\"seq\":N,\"hash\":…,\"time\":…,\"key_id\":…,\"sig\":…}); an anchor file is only ever appended to, so find out who wrote this line", path, line)
		}
		a.Line = line
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("anchor file %s: %w", path, err)
	}
	return out, nil
}

// ErrAnchorSuperseded is AppendAnchor's answer when the file already ends
// with an anchor of the same or a later seq: another process (the next
// leader of a cluster) anchored the chain while this one was deciding to,
// and an older head appended after it would only blur the stream.
var ErrAnchorSuperseded = errors.New("audit anchor: the anchor file already ends with this head or a later one")

// AppendAnchor appends a as one line to the file at path, creating it (mode
// 0600, and its directory entry synced) when missing, and syncs it before
// returning: an anchor reported written is on disk. Two processes may
// write one file (replicas mounting one volume, a leader handing over):
// the append holds an exclusive OS file lock on the file (flock(2);
// LockFileEx on Windows) from reading its last line to the fsync, so lines
// never interleave and the stream's seqs never go back. When the file
// already ends with an anchor of a's seq or a later one it appends nothing
// and returns an error wrapping ErrAnchorSuperseded (a last line that is
// not an anchor is appended after, for audit verify to report).
func AppendAnchor(path string, a Anchor) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, statErr := os.Stat(path)
	if errors.Is(statErr, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("audit.anchor.file: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit.anchor.file: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return fmt.Errorf("audit.anchor.file: lock %s: %w", path, err)
	}
	// Closing f releases the lock, on every path below. A last line that
	// is not an anchor does not stop the stream: the append goes on, and
	// audit verify names the line.
	if last, ok, err := ReadLastAnchor(path); err == nil && ok && last.Seq >= a.Seq {
		f.Close()
		return fmt.Errorf("%w (seq %d, anchored %s; this one: seq %d)", ErrAnchorSuperseded, last.Seq, last.Time, a.Seq)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("audit.anchor.file: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("audit.anchor.file: sync %s: %w", path, err)
	}
	if err := unlockFile(f); err != nil {
		f.Close()
		return fmt.Errorf("audit.anchor.file: unlock %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("audit.anchor.file: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if d, err := os.Open(filepath.Dir(path)); err == nil {
			_ = d.Sync()
			d.Close()
		}
	}
	return nil
}

// Anchorer writes the chain's signed head to an anchor file whenever it has
// moved since the last anchor it wrote.
type Anchorer struct {
	store kv.Store
	key   ed25519.PrivateKey
	path  string
	now   func() time.Time

	mu   sync.Mutex
	last Anchor // the newest anchor in the file, as far as this knows
}

// NewAnchorer returns an Anchorer of store's chain, signing with key, into
// the file at path. last is the newest anchor already in the file (zero
// when none), so that an unchanged head is not anchored twice.
func NewAnchorer(store kv.Store, key ed25519.PrivateKey, path string, now func() time.Time, last Anchor) *Anchorer {
	if now == nil {
		now = time.Now
	}
	return &Anchorer{store: store, key: key, path: path, now: now, last: last}
}

// Anchor writes the current head to the file unless it is already the
// newest anchor. It reports the anchor and whether it wrote one. It never
// anchors a head its key did not sign (that would lend a forged head the
// anchor's authority), nor a chain that disagrees with the last anchor it
// knows (rolled back or replaced since: anchoring it would make the
// rollback the stream's newest truth): each is an error.
func (a *Anchorer) Anchor(ctx context.Context) (Anchor, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var h Checkpoint
	var ok, signed bool
	pub := a.key.Public().(ed25519.PublicKey)
	err := a.store.View(ctx, func(tx kv.Tx) error {
		if a.last.Seq > 0 {
			if err := CheckAnchor(tx, a.last); err != nil {
				return fmt.Errorf("audit anchor: not anchoring: %w", err)
			}
		}
		var err error
		if h, ok, err = HeadOf(tx); err != nil || !ok {
			return err
		}
		signed, err = SignedBy(tx, pub)
		return err
	})
	if err != nil || !ok {
		return Anchor{}, false, err
	}
	if !signed {
		return Anchor{}, false, fmt.Errorf("audit anchor: the head at seq %d is not signed by this server's key; not anchoring it (run countersign audit verify)", h.Seq)
	}
	if a.last.Seq == h.Seq && a.last.Hash == h.Hash {
		return a.last, false, nil
	}
	an := SignAnchor(a.key, h.Seq, h.Hash, a.now())
	if err := AppendAnchor(a.path, an); errors.Is(err, ErrAnchorSuperseded) {
		return a.last, false, nil // another writer anchored it (or later)
	} else if err != nil {
		return Anchor{}, false, err
	}
	a.last = an
	return an, true, nil
}

// Newest returns the anchor with the highest seq (the last one written
// wins a tie), and false when there is none.
func Newest(anchors []Anchor) (Anchor, bool) {
	var best Anchor
	for _, x := range anchors {
		if x.Seq >= best.Seq {
			best = x
		}
	}
	return best, best.Seq > 0
}

// CheckAnchor is the start-up check of a store against the newest anchor:
// the chain must reach the anchored seq, hold the anchored hash there, and
// have been signed there by the anchor's key. It reads a few rows, not the
// chain; `countersign audit verify` checks everything.
func CheckAnchor(tx kv.Tx, a Anchor) error {
	h, ok, err := HeadOf(tx)
	if err != nil {
		return err
	}
	if !ok || h.Seq < a.Seq {
		return fmt.Errorf("the audit chain ends at seq %d, before the head anchored at %s: the store was rolled back, truncated or replaced", h.Seq, a)
	}
	if cp, ok, err := CheckpointOf(tx); err != nil {
		return err
	} else if ok && a.Seq <= cp.Seq {
		return nil // archived: audit verify --archive checks it
	}
	v, err := tx.Get(bucketAudit, kv.U64(a.Seq))
	if err != nil {
		return err
	}
	if h, err := rowHash(v); v == nil || err != nil || h != a.Hash {
		return fmt.Errorf("the audit chain's entry at seq %d is not the one anchored at %s: the chain was replaced", a.Seq, a)
	}
	keys, err := Keys(tx, nil)
	if err != nil {
		return err
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i].From <= a.Seq {
			if keys[i].PublicKey != "" && keys[i].PublicKey != a.KeyID {
				return fmt.Errorf("the audit chain says seq %d was signed by key %.16s…, but it was anchored at %s by key %.16s…: the chain was re-signed", a.Seq, keys[i].PublicKey, a, a.KeyID)
			}
			break
		}
	}
	return nil
}
