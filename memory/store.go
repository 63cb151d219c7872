package memory

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// Memory buckets. sk is a space key (Space.key), id a big-endian uint64.
const (
	bucketFacts  = "mem_facts"  // sk id -> Fact JSON: every fact, live or retired
	bucketSeq    = "mem_seq"    // sk -> last fact id of the space
	bucketLive   = "mem_live"   // sk subject 0x00 id -> binary record (record.go): ACTIVE and FLAGGED_CONFLICT only (the hot path)
	bucketSubj   = "mem_subj"   // sk subject 0x00 id -> empty: every fact of a subject (history)
	bucketPolicy = "mem_policy" // sk -> storedPolicy JSON
	bucketOpen   = "mem_open"   // sk id -> openEntry JSON: proposals awaiting a decision
	// bucketRecall (index.go) is the recall index, derived from mem_live.
	// bucketClosed (retention.go) finds closed proposals by closing time.
)

// SequentialBuckets are memory's buckets whose new keys sort after every key
// already there within a space (fact ids), for a store that fills such pages
// fuller (bolt.Options.Sequential). The bucket names stay memory's own.
func SequentialBuckets() []string { return []string{bucketFacts} }

// AuditedBuckets are memory's buckets written only in the same transaction
// as an audit entry (the facts): content in them next to an empty audit
// chain means the chain was emptied (approvals.Emptied). The bucket names
// stay memory's own.
func AuditedBuckets() []string { return []string{bucketFacts} }

func factKey(sp Space, id uint64) []byte {
	return append(spaceKey(sp), kv.U64(id)...)
}

func subjectPrefix(sp Space, subject string) []byte {
	k := append(spaceKey(sp), subject...)
	return append(k, 0)
}

func subjectKey(sp Space, subject string, id uint64) []byte {
	return append(subjectPrefix(sp, subject), kv.U64(id)...)
}

// nextID returns the space's next fact id: sequential per space from 1.
func nextID(tx kv.Tx, sp Space) (uint64, error) {
	b, err := tx.Get(bucketSeq, spaceKey(sp))
	if err != nil {
		return 0, err
	}
	n := kv.ParseU64(b) + 1
	return n, tx.Put(bucketSeq, spaceKey(sp), kv.U64(n))
}

// LastID returns the highest fact id issued in the space (0 if none).
func LastID(tx kv.Tx, sp Space) (uint64, error) {
	b, err := tx.Get(bucketSeq, spaceKey(sp))
	return kv.ParseU64(b), err
}

func decodeFact(b []byte) (*Fact, error) {
	var f Fact
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("memory: decode fact: %w", err)
	}
	if f.V != factVersion {
		return nil, fmt.Errorf("memory: fact #%d has unknown version %d", f.ID, f.V)
	}
	return &f, nil
}

// Load reads fact id of the space; it returns nil if there is none.
func Load(tx kv.Tx, sp Space, id uint64) (*Fact, error) {
	b, err := tx.Get(bucketFacts, factKey(sp, id))
	if err != nil || b == nil {
		return nil, err
	}
	return decodeFact(b)
}

// put writes a fact and keeps the indexes in step: the live record exists
// exactly while the fact is ACTIVE or FLAGGED_CONFLICT, the recall index
// follows the live index, and the open-proposal entry exists exactly while
// the fact is an open proposal.
func put(tx kv.Tx, f *Fact) error { return store(tx, f, false) }

// putNew is put for a fact just given its id, which has no entries yet.
func putNew(tx kv.Tx, f *Fact) error { return store(tx, f, true) }

func store(tx kv.Tx, f *Fact, fresh bool) error {
	f.V = factVersion
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	// First, while the fact's JSON is still the one its live entry was
	// derived from: an older store's space is indexed by its first write.
	st, err := ensureIndex(tx, f.Space)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketFacts, factKey(f.Space, f.ID), b); err != nil {
		return err
	}
	lk := subjectKey(f.Space, f.Subject, f.ID)
	if err := tx.Put(bucketSubj, lk, nil); err != nil {
		return err
	}
	sk := spaceKey(f.Space)
	var before, after *projection
	var old []byte
	if !fresh {
		if old, err = tx.Get(bucketLive, lk); err != nil {
			return err
		}
	}
	if old != nil {
		p, err := decodeProjection(len(sk), lk, old)
		if err != nil {
			return err
		}
		before = &p
	}
	if f.Status.Live() {
		rec, err := encodeRecord(f)
		if err != nil {
			return err
		}
		if err := tx.Put(bucketLive, lk, rec); err != nil {
			return err
		}
		p, err := decodeProjection(len(sk), lk, rec)
		if err != nil {
			return err
		}
		after = &p
	} else if old != nil {
		if err := tx.Delete(bucketLive, lk); err != nil {
			return err
		}
	}
	if err := updateIndex(tx, f.Space, sk, st, f.ID, before, after); err != nil {
		return err
	}
	ok := factKey(f.Space, f.ID)
	if !f.Open() {
		if f.closedUnapplied() {
			if err := tx.Put(bucketClosed, closedKey(f), nil); err != nil {
				return err
			}
		}
		return tx.Delete(bucketOpen, ok)
	}
	ob, err := json.Marshal(openEntry{V: 1, ID: f.ID, Space: f.Space, Target: f.Supersedes, ProposedAt: f.ProposedAt})
	if err != nil {
		return err
	}
	return tx.Put(bucketOpen, ok, ob)
}

// Live returns the ACTIVE and FLAGGED_CONFLICT facts of one subject, by id:
// a prefix scan of the live index, whose records are decoded without JSON,
// so its cost is the subject's live facts.
func Live(tx kv.Tx, sp Space, subject string) ([]*Fact, error) {
	prefix := subjectPrefix(sp, subject)
	var rs liveRecords
	if err := kv.Prefix(tx, bucketLive, prefix, func(k, v []byte) error {
		rs.add(kv.ParseU64(k[len(prefix):]), nil, v)
		return nil
	}); err != nil {
		return nil, err
	}
	jsubject := jsonString(subject)
	return rs.facts(tx, sp, func(string) string { return jsubject })
}

// LiveAll calls fn for every ACTIVE and FLAGGED_CONFLICT fact of the space,
// grouped by subject and then by id. It is one prefix scan of the live
// index: its cost is the space's live facts, not the store's.
func LiveAll(tx kv.Tx, sp Space, fn func(*Fact) error) error {
	prefix := spaceKey(sp)
	var rs liveRecords
	if err := kv.Prefix(tx, bucketLive, prefix, func(k, v []byte) error {
		if len(k) < len(prefix)+9 {
			return fmt.Errorf("memory: malformed live-index key")
		}
		rs.add(kv.ParseU64(k[len(k)-8:]), k[len(prefix):len(k)-9], v)
		return nil
	}); err != nil {
		return err
	}
	var raw, jsubject string // the subject of the previous fact, and its JSON form
	facts, err := rs.facts(tx, sp, func(subject string) string {
		if subject != raw || jsubject == "" {
			raw, jsubject = subject, jsonString(subject)
		}
		return jsubject
	})
	if err != nil {
		return err
	}
	for _, f := range facts {
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// liveRecords collects live-index entries during a scan (whose values are
// only valid in the callback) into one string, so that their facts share
// it and one slice of Facts.
type liveRecords struct {
	buf  strings.Builder
	recs []liveRec
}

type liveRec struct {
	id               uint64
	subj, start, end int // the subject and the value in buf
	older            bool
}

func (rs *liveRecords) add(id uint64, subject, v []byte) {
	if rs.recs == nil {
		// Room for 16 records like the first (the buffer doubles beyond):
		// a gate's subject has a handful, and every byte allocated here
		// brings the next collection closer on the gate's path.
		rs.buf.Grow(16 * (len(subject) + len(v)))
		rs.recs = make([]liveRec, 0, 16)
	}
	r := liveRec{id: id, subj: rs.buf.Len()}
	rs.buf.Write(subject)
	r.start = rs.buf.Len()
	r.older = !hasRecord(v)
	if !r.older {
		rs.buf.Write(v)
	}
	r.end = rs.buf.Len()
	rs.recs = append(rs.recs, r)
}

// facts decodes the collected records; jsubject gives the JSON form of a
// record's subject. An entry of an older store is loaded from its JSON.
func (rs *liveRecords) facts(tx kv.Tx, sp Space, jsubject func(string) string) ([]*Fact, error) {
	if len(rs.recs) == 0 {
		return nil, nil
	}
	jsp := jsonSpace(sp)
	s := rs.buf.String()
	slab := make([]Fact, len(rs.recs))
	out := make([]*Fact, len(rs.recs))
	for i, r := range rs.recs {
		if r.older {
			f, err := liveFact(tx, sp, jsp, "", r.id, nil)
			if err != nil {
				return nil, err
			}
			out[i] = f
			continue
		}
		if err := decodeRecordInto(&slab[i], jsp, jsubject(s[r.subj:r.start]), r.id, s[r.start:r.end]); err != nil {
			return nil, err
		}
		out[i] = &slab[i]
	}
	return out, nil
}

// projection is a decoded live-index entry: what recall ranks. Its slices
// alias the key and value it was decoded from.
type projection struct {
	id                    uint64
	subject               []byte
	flagged               bool
	category, value, said []byte
}

// decodeProjection decodes the part of a live-index entry that every
// version has: status, then category, value and said.
func decodeProjection(prefixLen int, k, v []byte) (projection, error) {
	var p projection
	if len(k) < prefixLen+9 || len(v) < 2 || v[0] != projectionVersion {
		return p, fmt.Errorf("memory: malformed live-index entry")
	}
	p.id = kv.ParseU64(k[len(k)-8:])
	p.subject = k[prefixLen : len(k)-9]
	p.flagged = v[1] == liveFlagged
	rest := v[2:]
	for _, dst := range []*[]byte{&p.category, &p.value, &p.said} {
		n, w := binary.Uvarint(rest)
		if w <= 0 || uint64(len(rest)-w) < n {
			return p, fmt.Errorf("memory: malformed live-index entry #%d", p.id)
		}
		*dst = rest[w : w+int(n)]
		rest = rest[w+int(n):]
	}
	return p, nil
}

// History returns every fact of a subject, oldest first (by id).
func History(tx kv.Tx, sp Space, subject string) ([]*Fact, error) {
	var out []*Fact
	prefix := subjectPrefix(sp, subject)
	err := kv.Prefix(tx, bucketSubj, prefix, func(k, _ []byte) error {
		id := kv.ParseU64(k[len(prefix):])
		f, err := Load(tx, sp, id)
		if err != nil {
			return err
		}
		if f != nil {
			out = append(out, f)
		}
		return nil
	})
	return out, err
}

// RecentRetired returns up to limit retired facts (SUPERSEDED or
// HISTORICAL) of the space, newest first.
func RecentRetired(tx kv.Tx, sp Space, limit int) ([]*Fact, error) {
	var out []*Fact
	prefix := spaceKey(sp)
	err := tx.Descend(bucketFacts, prefix, kv.PrefixEnd(prefix), func(_, v []byte) error {
		f, err := decodeFact(v)
		if err != nil {
			return err
		}
		if !f.Status.Live() {
			out = append(out, f)
			if len(out) >= limit {
				return kv.ErrStop
			}
		}
		return nil
	})
	return out, err
}

// storedPolicy is a space's reconcile policy as stored.
type storedPolicy struct {
	V         int                  `json:"v"`
	Mode      policy.ReconcileMode `json:"mode"`
	Authority []policy.SourceRank  `json:"authority,omitempty"`
	SetBy     string               `json:"set_by,omitempty"`
}

// LoadPolicy returns the space's reconcile policy and whether one was set.
func LoadPolicy(tx kv.Tx, sp Space) (policy.ReconcilePolicy, bool, error) {
	b, err := tx.Get(bucketPolicy, spaceKey(sp))
	if err != nil || b == nil {
		return policy.ReconcilePolicy{Mode: policy.ModeRecency}, false, err
	}
	var p storedPolicy
	if err := json.Unmarshal(b, &p); err != nil {
		return policy.ReconcilePolicy{}, false, fmt.Errorf("memory: decode policy of %s: %w", sp, err)
	}
	return policy.ReconcilePolicy{Mode: p.Mode, Authority: p.Authority}, true, nil
}

// SavePolicy stores the space's reconcile policy.
func SavePolicy(tx kv.Tx, sp Space, p policy.ReconcilePolicy, setBy string) error {
	b, err := json.Marshal(storedPolicy{V: 1, Mode: p.Mode, Authority: p.Authority, SetBy: setBy})
	if err != nil {
		return err
	}
	return tx.Put(bucketPolicy, spaceKey(sp), b)
}

// openEntry is one open proposal in the index the sweep walks, so that the
// sweep never scans facts.
type openEntry struct {
	V          int       `json:"v"`
	ID         uint64    `json:"id"`
	Space      Space     `json:"space"`
	Target     uint64    `json:"target,omitempty"`
	ProposedAt time.Time `json:"proposed_at"`
}

// OpenProposals returns the space's open proposals, oldest first.
func OpenProposals(tx kv.Tx, sp Space) ([]*Fact, error) {
	var out []*Fact
	prefix := spaceKey(sp)
	err := kv.Prefix(tx, bucketOpen, prefix, func(k, _ []byte) error {
		f, err := Load(tx, sp, kv.ParseU64(k[len(prefix):]))
		if err != nil {
			return err
		}
		if f != nil && f.Open() {
			out = append(out, f)
		}
		return nil
	})
	return out, err
}

// LivePage returns up to limit live facts (ACTIVE or flagged) of the space
// with an id above after, in id order, and whether more follow. It reads
// the facts in id order and keeps only the page, so a listing of a large
// space holds one page in memory, not the space.
func LivePage(tx kv.Tx, sp Space, after uint64, limit int) (page []*Fact, more bool, err error) {
	if after == math.MaxUint64 || limit < 1 {
		return nil, false, nil
	}
	prefix := spaceKey(sp)
	err = tx.Ascend(bucketFacts, factKey(sp, after+1), kv.PrefixEnd(prefix), func(_, v []byte) error {
		f, err := decodeFact(v)
		if err != nil {
			return err
		}
		if !f.Status.Live() {
			return nil
		}
		if len(page) == limit {
			more = true
			return kv.ErrStop
		}
		page = append(page, f)
		return nil
	})
	return page, more, err
}
