package memory

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/kv"
)

// The recall index (bucketRecall) lets a recall in a large space read only
// the facts that share a word with the question, plus the critical ones,
// without tokenising any fact. It indexes the ACTIVE facts of a space (the
// only ones a recall ranks), is derived from the live index, and is kept in
// step by put in the same transaction as the facts. A space's first write
// gives it a state (a new space, or a space of a store written before the
// index existed). A small space is only counted, or not even that while
// no fact id is past indexAt (see the modes), since a scan of its live
// index is as fast; the write that takes it past indexAt ACTIVE facts
// builds its index from the live index, which is kept from then on.
//
// The index is log-structured, so that a write touches two adjacent keys
// of its space rather than one key per word:
//
//   - A fact's index content (its words, each with the fields holding it,
//     and its category) is first written as a pending log entry.
//   - A fact whose content is already merged into the term blocks and then
//     changes or leaves ACTIVE gets a tombstone log entry naming that
//     content; readers ignore the merged postings of a tombstoned fact.
//   - When a space's log reaches mergeAt entries, the write that reaches
//     it merges the log into the term blocks, one read-modify-write per
//     term, so a word shared by many facts is rewritten once per merge and
//     not once per fact.
//
// Keys, under the space key sk (tags in key order):
//
//	sk 'c' term start(8)  -> block of the merged facts of category term (lower-cased)
//	sk 'd' id(8) kind(1)  -> log entry of fact id: kind 0 a tombstone (the
//	                         content the blocks hold), kind 1 pending
//	                         (subject, content)
//	sk 'e'                -> state: version, mode, ACTIVE count, FLAGGED
//	                         count, log entries
//	sk 'i' id(8)          -> the subject of merged ACTIVE fact id (to find its live record)
//	sk 'w' term start(8)  -> block of the merged facts holding word term
//
// A term in a key is its uvarint length and its bytes or, past
// maxTermInline bytes, its length and a 24-byte SHA-256 prefix, so that no
// key grows with the text. A block holds up to maxBlock postings in id
// order, each a uvarint id delta (from the block's start, then from the
// previous id) and a mask byte: the fields holding the word (1 subject,
// 2 value, 4 said; 0 for a category). Every id of a block is at least its
// start and below the next block's start.
const bucketRecall = "mem_recall"

// indexVersion is the first byte of a space's state. A space whose state
// is missing or of another version is ranked by a scan of its live index,
// and its state (and index) is rebuilt by its next write.
const indexVersion = 1

const (
	tagCat     = 'c'
	tagLog     = 'd'
	tagState   = 'e'
	tagSubject = 'i'
	tagWord    = 'w'
)

// Kinds of log entry.
const (
	logTomb    = 0
	logPending = 1
)

const (
	maxBlock      = 128
	maxTermInline = 64
	mergeAt       = 128 // log entries that trigger a merge
	indexAt       = 128 // ACTIVE facts past which a space is indexed
)

// Field bits of a word posting.
const (
	inSubject = 1 << 0
	inValue   = 1 << 1
	inSaid    = 1 << 2
)

// maskWeight is the score a question word adds when it is in the fields of
// mask: weightSubject, weightValue and weightSaid summed.
var maskWeight = [8]int32{0, 3, 2, 5, 1, 4, 3, 6}

// indexState is a space's recall-index state.
type indexState struct {
	mode                 byte
	active, flagged, log uint64 // counted and indexed spaces only
}

// Modes of a space's index. Recall scans a space that is not indexed.
const (
	// modeCounted: its ACTIVE and FLAGGED facts are counted; the write that
	// takes it past indexAt ACTIVE facts builds its index.
	modeCounted = 0
	// modeIndexed: counted and indexed, for good.
	modeIndexed = 1
	// modeSmall: no fact id past indexAt yet, so nothing is kept; the
	// write of fact indexAt+1 counts the space.
	modeSmall = 2
)

func tagKey(sk []byte, tag byte) []byte {
	k := make([]byte, 0, len(sk)+9)
	k = append(k, sk...)
	return append(k, tag)
}

func idKey(sk []byte, tag byte, id uint64) []byte {
	return append(tagKey(sk, tag), kv.U64(id)...)
}

func logKey(sk []byte, id uint64, kind byte) []byte {
	return append(idKey(sk, tagLog, id), kind)
}

func encodeState(s indexState) []byte {
	b := []byte{indexVersion, s.mode}
	b = binary.AppendUvarint(b, s.active)
	b = binary.AppendUvarint(b, s.flagged)
	return binary.AppendUvarint(b, s.log)
}

var errIndex = errors.New("memory: malformed recall index")

// loadState returns the space's index state and whether it has one (of
// the current version).
func loadState(tx kv.Tx, sk []byte) (indexState, bool, error) {
	v, err := tx.Get(bucketRecall, tagKey(sk, tagState))
	if err != nil || len(v) == 0 || v[0] != indexVersion {
		return indexState{}, false, err
	}
	if len(v) < 2 || v[1] > modeSmall {
		return indexState{}, false, errIndex
	}
	r := recordReader[[]byte]{v: v, off: 2}
	s := indexState{mode: v[1], active: r.uvarint(), flagged: r.uvarint(), log: r.uvarint()}
	if r.err != nil || r.off != len(v) {
		return indexState{}, false, errIndex
	}
	return s, true, nil
}

// termPrefix is the key prefix of one term's blocks.
func termPrefix(sk []byte, tag byte, term string) []byte {
	return appendTermPrefix(make([]byte, 0, len(sk)+1+binary.MaxVarintLen64+min(len(term), maxTermInline)+8), sk, tag, []byte(term))
}

func appendTermPrefix(k, sk []byte, tag byte, term []byte) []byte {
	k = append(k, sk...)
	k = append(k, tag)
	k = binary.AppendUvarint(k, uint64(len(term)))
	if len(term) <= maxTermInline {
		return append(k, term...)
	}
	h := sha256.Sum256(term)
	return append(k, h[:24]...)
}

// contentOf is what the index holds for a live fact, as its live-index
// entry gives it, encoded: nil for a fact the index does not hold
// (FLAGGED). It is the fact's category, lower-cased as critical categories
// are compared, then its words (stopwords left out: they never match a
// question), sorted, each with the fields holding it:
//
//	uvarint len, category; uvarint count; count × (uvarint len, word, mask)
func contentOf(p *projection) []byte {
	if p == nil || p.flagged {
		return nil
	}
	type word struct {
		off, n int
		mask   byte
	}
	var arena, buf []byte
	var ws []word
	for _, fld := range [...]struct {
		text []byte
		bit  byte
	}{{p.subject, inSubject}, {p.value, inValue}, {p.said, inSaid}} {
		for i := 0; ; {
			var w []byte
			var ok bool
			if w, i, ok = nextWord(fld.text, i, buf); !ok {
				break
			}
			buf = w
			if !stopwords[string(w)] {
				ws = append(ws, word{off: len(arena), n: len(w), mask: fld.bit})
				arena = append(arena, w...)
			}
		}
	}
	text := func(w word) []byte { return arena[w.off : w.off+w.n] }
	slices.SortFunc(ws, func(a, b word) int { return bytes.Compare(text(a), text(b)) })
	n := 0
	for _, w := range ws {
		if n > 0 && bytes.Equal(text(ws[n-1]), text(w)) {
			ws[n-1].mask |= w.mask
			continue
		}
		ws[n] = w
		n++
	}
	ws = ws[:n]
	cat := p.category
	if bytes.ContainsFunc(cat, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= utf8.RuneSelf }) {
		cat = []byte(strings.ToLower(string(cat)))
	}
	b := make([]byte, 0, len(cat)+len(arena)+3*len(ws)+2*binary.MaxVarintLen64)
	b = binary.AppendUvarint(b, uint64(len(cat)))
	b = append(b, cat...)
	b = binary.AppendUvarint(b, uint64(len(ws)))
	for _, w := range ws {
		b = binary.AppendUvarint(b, uint64(w.n))
		b = append(b, text(w)...)
		b = append(b, w.mask)
	}
	return b
}

// scanContent reads an encoded content without allocating: the category,
// then fn for each word and its mask. The slices alias v.
func scanContent(v []byte, fn func(word []byte, mask byte)) ([]byte, error) {
	r := recordReader[[]byte]{v: v}
	a, b := r.span()
	category := v[a:b]
	n := r.uvarint()
	for ; n > 0 && r.err == nil; n-- {
		a, b := r.span()
		if r.err == nil && r.off >= len(v) {
			r.err = errIndex
		}
		if r.err != nil {
			break
		}
		fn(v[a:b], v[r.off])
		r.off++
	}
	if r.err != nil || r.off != len(v) {
		return nil, errIndex
	}
	return category, nil
}

// posting is one fact in a term's list.
type posting struct {
	id   uint64
	mask byte
}

func decodeBlock(dst []posting, start uint64, v []byte) ([]posting, error) {
	prev := start
	for len(v) > 0 {
		d, w := binary.Uvarint(v)
		if w <= 0 || w >= len(v) {
			return dst, errIndex
		}
		prev += d
		dst = append(dst, posting{id: prev, mask: v[w]})
		v = v[w+1:]
	}
	return dst, nil
}

func appendPostings(b []byte, prev uint64, ps []posting) []byte {
	for _, p := range ps {
		b = binary.AppendUvarint(b, p.id-prev)
		b = append(b, p.mask)
		prev = p.id
	}
	return b
}

// scanTerm calls fn for each merged posting of a term, in id order,
// without allocating.
func scanTerm(tx kv.Tx, prefix []byte, fn func(id uint64, mask byte)) error {
	return kv.Prefix(tx, bucketRecall, prefix, func(k, v []byte) error {
		if len(k) != len(prefix)+8 {
			return errIndex
		}
		prev := kv.ParseU64(k[len(prefix):])
		for len(v) > 0 {
			d, w := binary.Uvarint(v)
			if w <= 0 || w >= len(v) {
				return errIndex
			}
			prev += d
			fn(prev, v[w])
			v = v[w+1:]
		}
		return nil
	})
}

// termEdit is the change a merge makes to one term: postings to remove
// (ids) and to add or re-mask.
type termEdit struct {
	del []uint64
	add []posting
}

// applyTerm merges one term's edit into its blocks.
func applyTerm(tx kv.Tx, prefix []byte, e *termEdit) error {
	slices.Sort(e.del)
	slices.SortFunc(e.add, func(a, b posting) int { return cmpID(a.id, b.id) })
	if len(e.add) == 0 && len(e.del) == 0 {
		return nil
	}
	// The common case: only new facts, all after the term's last posting.
	if len(e.del) == 0 {
		var key, val []byte
		if err := tx.Descend(bucketRecall, prefix, kv.PrefixEnd(prefix), func(k, v []byte) error {
			key, val = bytes.Clone(k), bytes.Clone(v)
			return kv.ErrStop
		}); err != nil {
			return err
		}
		if key == nil {
			return putBlocks(tx, prefix, nil, e.add)
		}
		if len(key) != len(prefix)+8 {
			return errIndex
		}
		start := kv.ParseU64(key[len(prefix):])
		ps, err := decodeBlock(nil, start, val)
		if err != nil {
			return err
		}
		if len(ps) > 0 && e.add[0].id > ps[len(ps)-1].id {
			return putBlocks(tx, prefix, &block{key: key, start: start, ps: ps}, e.add)
		}
	}
	// Otherwise rewrite the blocks the edit touches.
	var blocks []block
	if err := kv.Prefix(tx, bucketRecall, prefix, func(k, v []byte) error {
		if len(k) != len(prefix)+8 {
			return errIndex
		}
		b := block{key: bytes.Clone(k), start: kv.ParseU64(k[len(prefix):])}
		var err error
		b.ps, err = decodeBlock(nil, b.start, v)
		blocks = append(blocks, b)
		return err
	}); err != nil {
		return err
	}
	if len(blocks) == 0 {
		return putBlocks(tx, prefix, nil, e.add)
	}
	changed := make([]bool, len(blocks))
	for _, id := range e.del {
		i := owner(blocks, id)
		if j := slices.IndexFunc(blocks[i].ps, func(p posting) bool { return p.id == id }); j >= 0 {
			blocks[i].ps = slices.Delete(blocks[i].ps, j, j+1)
			changed[i] = true
		}
	}
	for _, p := range e.add {
		i := owner(blocks, p.id)
		ps := blocks[i].ps
		j, found := slices.BinarySearchFunc(ps, p.id, func(x posting, id uint64) int { return cmpID(x.id, id) })
		if found {
			ps[j].mask = p.mask
		} else {
			blocks[i].ps = slices.Insert(ps, j, p)
		}
		changed[i] = true
	}
	for i := range blocks {
		if !changed[i] {
			continue
		}
		b := &blocks[i]
		if err := tx.Delete(bucketRecall, b.key); err != nil {
			return err
		}
		if err := putBlocks(tx, prefix, nil, b.ps); err != nil {
			return err
		}
	}
	return nil
}

// owner is the index of the block id belongs in: the last starting at or
// before it, or the first.
func owner(blocks []block, id uint64) int {
	i, _ := slices.BinarySearchFunc(blocks, id, func(b block, id uint64) int {
		if b.start <= id {
			return -1
		}
		return 1
	})
	return max(i-1, 0)
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// block is one block of a term being rewritten.
type block struct {
	key   []byte
	start uint64
	ps    []posting
}

// putBlocks writes sorted postings ps after the block last (nil: none;
// else its postings all come before ps): last is filled up to maxBlock,
// the rest goes into new blocks, each keyed by its first id.
func putBlocks(tx kv.Tx, prefix []byte, last *block, ps []posting) error {
	if last != nil {
		n := min(maxBlock-len(last.ps), len(ps))
		if n > 0 {
			all := append(last.ps, ps[:n]...)
			if err := tx.Put(bucketRecall, last.key, appendPostings(nil, last.start, all)); err != nil {
				return err
			}
			ps = ps[n:]
		}
	}
	for len(ps) > 0 {
		n := min(len(ps), maxBlock)
		k := append(bytes.Clone(prefix), kv.U64(ps[0].id)...)
		if err := tx.Put(bucketRecall, k, appendPostings(nil, ps[0].id, ps[:n])); err != nil {
			return err
		}
		ps = ps[n:]
	}
	return nil
}

// edits collects a merge's term edits, by term key.
type edits struct {
	sk  []byte
	m   map[string]*termEdit
	buf []byte
}

func newEdits(sk []byte) *edits { return &edits{sk: sk, m: map[string]*termEdit{}} }

func (e *edits) at(tag byte, term []byte) *termEdit {
	e.buf = appendTermPrefix(e.buf[:0], e.sk, tag, term)
	t := e.m[string(e.buf)]
	if t == nil {
		t = &termEdit{}
		e.m[string(e.buf)] = t
	}
	return t
}

// add adds fact id's encoded content c; del removes it.
func (e *edits) add(id uint64, c []byte) error { return e.content(id, c, false) }
func (e *edits) del(id uint64, c []byte) error { return e.content(id, c, true) }

func (e *edits) content(id uint64, c []byte, del bool) error {
	edit := func(t *termEdit, mask byte) {
		if del {
			t.del = append(t.del, id)
		} else {
			t.add = append(t.add, posting{id: id, mask: mask})
		}
	}
	cat, err := scanContent(c, func(w []byte, mask byte) { edit(e.at(tagWord, w), mask) })
	if err != nil {
		return err
	}
	if len(cat) > 0 {
		edit(e.at(tagCat, cat), 0)
	}
	return nil
}

// apply writes every term's edit, in key order.
func (e *edits) apply(tx kv.Tx) error {
	for _, k := range slices.Sorted(maps.Keys(e.m)) {
		if err := applyTerm(tx, []byte(k), e.m[k]); err != nil {
			return err
		}
	}
	return nil
}

// merge moves a space's log into its term blocks and subject entries and
// deletes it.
func merge(tx kv.Tx, sk []byte, st indexState) error {
	m := newEdits(sk)
	type subject struct {
		id uint64
		s  []byte // nil: delete
	}
	var subjects []subject
	var done [][]byte
	prefix := tagKey(sk, tagLog)
	if err := kv.Prefix(tx, bucketRecall, prefix, func(k, v []byte) error {
		id, kind, err := parseLogKey(prefix, k)
		if err != nil {
			return err
		}
		if kind == logTomb {
			if err := m.del(id, v); err != nil {
				return err
			}
			subjects = append(subjects, subject{id: id})
		} else {
			s, c, err := splitPending(v)
			if err != nil {
				return err
			}
			if err := m.add(id, c); err != nil {
				return err
			}
			subjects = append(subjects, subject{id: id, s: bytes.Clone(s)})
		}
		done = append(done, bytes.Clone(k))
		return nil
	}); err != nil {
		return err
	}
	if err := m.apply(tx); err != nil {
		return err
	}
	// A fact's tombstone comes before its pending entry (key order), so a
	// fact both retired from the blocks and pending ends with its subject.
	for _, s := range subjects {
		var err error
		if s.s == nil {
			err = tx.Delete(bucketRecall, idKey(sk, tagSubject, s.id))
		} else {
			err = tx.Put(bucketRecall, idKey(sk, tagSubject, s.id), s.s)
		}
		if err != nil {
			return err
		}
	}
	for _, k := range done {
		if err := tx.Delete(bucketRecall, k); err != nil {
			return err
		}
	}
	st.log = 0
	return tx.Put(bucketRecall, tagKey(sk, tagState), encodeState(st))
}

func parseLogKey(prefix, k []byte) (uint64, byte, error) {
	if len(k) != len(prefix)+9 || k[len(k)-1] > logPending {
		return 0, 0, errIndex
	}
	return kv.ParseU64(k[len(prefix):]), k[len(k)-1], nil
}

// A pending entry is the fact's subject (as in its key), then its content.
func encodePending(subject []byte, c []byte) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(subject)+len(c))
	b = binary.AppendUvarint(b, uint64(len(subject)))
	b = append(b, subject...)
	return append(b, c...)
}

// splitPending returns a pending entry's subject and content, aliasing v.
func splitPending(v []byte) ([]byte, []byte, error) {
	r := recordReader[[]byte]{v: v}
	a, b := r.span()
	if r.err != nil {
		return nil, nil, errIndex
	}
	return v[a:b], v[b:], nil
}

// updateIndex records that fact id's live-index entry went from old (nil:
// it was not live) to cur (nil: no longer live), in a space whose index
// state is st.
func updateIndex(tx kv.Tx, sp Space, sk []byte, st indexState, id uint64, old, cur *projection) error {
	if st.mode == modeSmall {
		if id <= indexAt {
			return nil
		}
		_, err := buildIndex(tx, sp, false)
		return err
	}
	next := st
	if old != nil && old.flagged {
		next.flagged--
	}
	if cur != nil && cur.flagged {
		next.flagged++
	}
	if st.mode == modeCounted {
		if old != nil && !old.flagged {
			next.active--
		}
		if cur != nil && !cur.flagged {
			next.active++
		}
		if next.active > indexAt {
			_, err := buildIndex(tx, sp, true)
			return err
		}
	} else if bv, av := contentOf(old), contentOf(cur); (bv == nil) != (av == nil) || !bytes.Equal(bv, av) {
		if err := moveContent(tx, sk, &next, id, cur, bv, av); err != nil {
			return err
		}
	}
	if next == st {
		return nil
	}
	if next.log >= mergeAt {
		return merge(tx, sk, next)
	}
	return tx.Put(bucketRecall, tagKey(sk, tagState), encodeState(next))
}

// moveContent replaces fact id's index content bv (nil: none) by av (nil:
// none).
func moveContent(tx kv.Tx, sk []byte, st *indexState, id uint64, cur *projection, bv, av []byte) error {
	pk := logKey(sk, id, logPending)
	pending := false
	if bv != nil {
		v, err := tx.Get(bucketRecall, pk)
		if err != nil {
			return err
		}
		if pending = v != nil; !pending {
			// Merged: the blocks hold bv until the next merge removes it.
			if err := tx.Put(bucketRecall, logKey(sk, id, logTomb), bv); err != nil {
				return err
			}
			st.log++
		}
	}
	switch {
	case av != nil:
		if err := tx.Put(bucketRecall, pk, encodePending(cur.subject, av)); err != nil {
			return err
		}
		if !pending {
			st.log++
		}
	case pending:
		if err := tx.Delete(bucketRecall, pk); err != nil {
			return err
		}
		st.log--
	}
	switch {
	case av != nil && bv == nil:
		st.active++
	case av == nil && bv != nil:
		st.active--
	}
	return nil
}

// ensureIndex returns the space's index state, first building it from the
// live index if it has none: a new space, or the first write to a space of
// a store written before the index existed.
func ensureIndex(tx kv.Tx, sp Space) (indexState, error) {
	st, ok, err := loadState(tx, spaceKey(sp))
	if err != nil || ok {
		return st, err
	}
	return buildIndex(tx, sp, false)
}

// buildIndex (re)builds a space's recall index from its live index: its
// counts (unless no fact id is past indexAt), and, when index is set or the
// space has more than indexAt ACTIVE facts, its merged index. It gives the
// space's older live-index entries their records.
func buildIndex(tx kv.Tx, sp Space, index bool) (indexState, error) {
	sk := spaceKey(sp)
	// Anything left of an index of another version goes first.
	var stale [][]byte
	if err := kv.Prefix(tx, bucketRecall, sk, func(k, _ []byte) error {
		stale = append(stale, bytes.Clone(k))
		return nil
	}); err != nil {
		return indexState{}, err
	}
	for _, k := range stale {
		if err := tx.Delete(bucketRecall, k); err != nil {
			return indexState{}, err
		}
	}
	type entry struct{ k, v []byte }
	var entries []entry
	if err := kv.Prefix(tx, bucketLive, sk, func(k, v []byte) error {
		entries = append(entries, entry{bytes.Clone(k), bytes.Clone(v)})
		return nil
	}); err != nil {
		return indexState{}, err
	}
	var st indexState
	var actives []projection
	m := newEdits(sk)
	for _, e := range entries {
		p, err := decodeProjection(len(sk), e.k, e.v)
		if err != nil {
			return indexState{}, err
		}
		if !hasRecord(e.v) {
			f, err := Load(tx, sp, p.id)
			if err != nil {
				return indexState{}, err
			}
			if f == nil {
				return indexState{}, fmt.Errorf("memory: live index of %s names #%d, which does not exist", sp, p.id)
			}
			rec, err := encodeRecord(f)
			if err != nil {
				return indexState{}, err
			}
			if err := tx.Put(bucketLive, e.k, rec); err != nil {
				return indexState{}, err
			}
			if p, err = decodeProjection(len(sk), e.k, rec); err != nil {
				return indexState{}, err
			}
		}
		if p.flagged {
			st.flagged++
			continue
		}
		st.active++
		actives = append(actives, p)
	}
	last, err := LastID(tx, sp)
	if err != nil {
		return indexState{}, err
	}
	switch {
	case index || st.active > indexAt:
		st.mode = modeIndexed
	case last <= indexAt:
		st = indexState{mode: modeSmall}
	}
	if st.mode == modeIndexed {
		for _, p := range actives {
			if err := m.add(p.id, contentOf(&p)); err != nil {
				return indexState{}, err
			}
			if err := tx.Put(bucketRecall, idKey(sk, tagSubject, p.id), p.subject); err != nil {
				return indexState{}, err
			}
		}
		if err := m.apply(tx); err != nil {
			return indexState{}, err
		}
	}
	return st, tx.Put(bucketRecall, tagKey(sk, tagState), encodeState(st))
}
