package memory

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/kv"
)

// stopwords are ignored when ranking: they match almost any fact.
var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "is": true, "are": true, "was": true, "were": true,
	"be": true, "been": true, "of": true, "to": true, "in": true, "on": true, "for": true,
	"and": true, "or": true, "what": true, "which": true, "who": true, "how": true,
	"when": true, "where": true, "why": true, "does": true, "do": true, "did": true,
	"it": true, "its": true, "this": true, "that": true, "these": true, "those": true,
	"with": true, "as": true, "at": true, "by": true, "from": true, "about": true,
	"any": true, "some": true, "there": true, "has": true, "have": true, "had": true,
	"her": true, "his": true, "their": true, "our": true, "my": true, "your": true,
	"me": true, "we": true, "you": true, "she": true, "he": true, "they": true,
	"i": true, "should": true, "would": true, "could": true, "can": true, "will": true,
	"current": true, "currently": true, "now": true, "us": true, "them": true,
}

// Tokens splits text into lower-case words of letters and digits, without
// stopwords, each once, in order of first appearance.
func Tokens(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if stopwords[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// Field weights of the lexical score.
const (
	weightSubject = 3
	weightValue   = 2
	weightSaid    = 1
)

// scorer computes the lexical relevance of a fact to a question: each
// distinct question word found in the subject counts 3, in the value 2, in
// the sentence that was said 1. It is deterministic (no model, no
// randomness) and allocation-free per fact, so that ranking a large space
// costs one pass over its bytes.
type scorer struct {
	q   map[string]int // question word -> index
	hit []bool
	buf []byte
}

func newScorer(question string) *scorer {
	toks := Tokens(question)
	s := &scorer{q: make(map[string]int, len(toks)), hit: make([]bool, len(toks)), buf: make([]byte, 0, 64)}
	for i, t := range toks {
		s.q[t] = i
	}
	return s
}

// nextWord finds the first word of text at or after i: a maximal run of
// letters and digits, lower-cased rune by rune into buf. It returns the
// word (buf's new contents), the index after it, and false when text holds
// no further word. The scorer and the recall index split text with it, so
// that both see exactly the same words.
func nextWord(text []byte, i int, buf []byte) ([]byte, int, bool) {
	buf = buf[:0]
	for i < len(text) {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				buf = append(buf, c)
				continue
			case 'A' <= c && c <= 'Z':
				buf = append(buf, c+'a'-'A')
				continue
			}
		} else {
			r, w := utf8.DecodeRune(text[i:])
			i += w
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				buf = utf8.AppendRune(buf, unicode.ToLower(r))
				continue
			}
		}
		if len(buf) > 0 {
			return buf, i, true
		}
	}
	return buf, i, len(buf) > 0
}

// field scores one field: weight for each distinct question word in text.
func (s *scorer) field(text []byte, weight int) int {
	if len(s.q) == 0 || len(text) == 0 {
		return 0
	}
	clear(s.hit)
	n := 0
	for i := 0; ; {
		var w []byte
		var ok bool
		if w, i, ok = nextWord(text, i, s.buf); !ok {
			break
		}
		s.buf = w
		if j, found := s.q[string(w)]; found && !s.hit[j] {
			s.hit[j] = true
			n += weight
		}
	}
	return n
}

func (s *scorer) score(subject, value, said []byte) int {
	return s.field(subject, weightSubject) + s.field(value, weightValue) + s.field(said, weightSaid)
}

// isCritical reports whether a category (any case) is in the critical set.
func isCritical(set map[string]bool, category []byte) bool {
	if len(category) == 0 || len(set) == 0 {
		return false
	}
	for _, c := range category {
		if 'A' <= c && c <= 'Z' || c >= utf8.RuneSelf {
			return set[strings.ToLower(string(category))]
		}
	}
	return set[string(category)]
}

// RecallRequest is one recall.
type RecallRequest struct {
	Question string
	// Critical are the critical categories (lower-case): their active facts
	// are always in context, beside the ranked ones.
	Critical map[string]bool
	Context  int // recall_context: a space with at most this many active facts is taken whole
	Budget   int // critical_budget: more critical facts than this fail the read
}

// Recalled is one fact placed in a recall's context.
type Recalled struct {
	Fact     *Fact
	Score    int
	Critical bool
}

// Recall is what a recall placed in context.
type Recall struct {
	Facts []Recalled // by score, then id
	// FlaggedSubjects are the subjects in context that also have a flagged
	// fact, in order of first appearance.
	FlaggedSubjects []string
	Active          int  // active facts in the space
	Whole           bool // the space was taken whole
}

// CriticalOverflowError is the error of a recall whose critical set exceeds
// the budget: the read fails rather than drop any critical fact.
type CriticalOverflowError struct {
	Count, Budget int
	Categories    []string
}

// Error says nothing was dropped and how to fix it.
func (e *CriticalOverflowError) Error() string {
	return fmt.Sprintf("Recall refused: %d facts in this space are in critical categories (%s), over the critical budget of %d. Nothing was dropped: a partial critical set would hide exactly the facts it exists to show. Raise memory.critical_budget, narrow memory.critical_categories, or split the facts across memory spaces.",
		e.Count, strings.Join(e.Categories, ", "), e.Budget)
}

// candidate is an ACTIVE fact being ranked. ref is its record in
// recallScan's buffer.
type candidate struct {
	id       uint64
	score    int
	critical bool
	ref      int
}

// overflow is the error of a recall with count critical facts, over the
// budget.
func overflow(count int, req RecallRequest) error {
	cats := make([]string, 0, len(req.Critical))
	for c := range req.Critical {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	return &CriticalOverflowError{Count: count, Budget: req.Budget, Categories: cats}
}

// ranking accumulates the candidates of one recall.
type ranking struct {
	req      RecallRequest
	sc       *scorer
	cands    []candidate
	flagged  map[string]bool
	critical int
	ref      int // given to the next candidate added
}

func newRanking(req RecallRequest) *ranking {
	return &ranking{req: req, sc: newScorer(req.Question), flagged: map[string]bool{}}
}

func (r *ranking) add(id uint64, flagged bool, subject, category, value, said []byte) {
	if flagged {
		r.flagged[string(subject)] = true
		return
	}
	c := candidate{id: id, score: r.sc.score(subject, value, said), critical: isCritical(r.req.Critical, category), ref: r.ref}
	if c.critical {
		r.critical++
	}
	r.cands = append(r.cands, c)
}

// choose checks the critical budget, then picks the context: the whole
// space when it has at most Context active facts; otherwise the Context
// best-scoring facts with a score above zero (ties by id), plus every
// critical fact, beside the ranked ones.
func (r *ranking) choose() ([]candidate, bool, error) {
	if r.critical > r.req.Budget {
		return nil, false, overflow(r.critical, r.req)
	}
	c := r.cands
	sort.Slice(c, func(i, j int) bool {
		if c[i].score != c[j].score {
			return c[i].score > c[j].score
		}
		return c[i].id < c[j].id
	})
	whole := len(c) <= r.req.Context
	var out []candidate
	ranked := 0
	for _, x := range c {
		switch {
		case whole, x.critical:
		case x.score > 0 && ranked < r.req.Context:
			ranked++
		default:
			continue
		}
		out = append(out, x)
	}
	return out, whole, nil
}

// result builds the recall from the chosen candidates and their facts.
func (r *ranking) result(chosen []candidate, whole bool, facts map[uint64]*Fact) Recall {
	out := Recall{Active: len(r.cands), Whole: whole}
	seen := map[string]bool{}
	for _, c := range chosen {
		f := facts[c.id]
		out.Facts = append(out.Facts, Recalled{Fact: f, Score: c.score, Critical: c.critical})
		if r.flagged[f.Subject] && !seen[f.Subject] {
			seen[f.Subject] = true
			out.FlaggedSubjects = append(out.FlaggedSubjects, f.Subject)
		}
	}
	return out
}

// Select ranks live facts for a question, purely. Only ACTIVE facts reach
// the context. A space with at most Context active facts is taken whole;
// otherwise the Context best-scoring facts with a score above zero (ties by
// id) are taken. Facts of a critical category are always included, beside
// the ranked ones; more than Budget of them is a *CriticalOverflowError.
func Select(live []*Fact, req RecallRequest) (Recall, error) {
	r := newRanking(req)
	byID := make(map[uint64]*Fact, len(live))
	for _, f := range live {
		if !f.Status.Live() {
			continue
		}
		byID[f.ID] = f
		r.add(f.ID, f.Status == StatusFlagged, []byte(f.Subject), []byte(f.Category), []byte(f.Value), []byte(f.Said))
	}
	chosen, whole, err := r.choose()
	if err != nil {
		return Recall{}, err
	}
	return r.result(chosen, whole, byID), nil
}

// RecallSpace ranks the space's live facts for a question, without
// decoding JSON. A space with more than Context active facts and a recall
// index (index.go: more than indexAt active facts) is ranked from the
// index: only the facts sharing a word with the question, and the critical
// ones, are scored. Any other space (a small one, or one of a store written
// before the index existed, until its next write) is ranked by one prefix
// scan of its live index. Both give exactly what Select gives over the
// space's live facts.
func RecallSpace(tx kv.Tx, sp Space, req RecallRequest) (Recall, error) {
	st, ok, err := loadState(tx, spaceKey(sp))
	if err != nil {
		return Recall{}, err
	}
	if !ok || st.mode != modeIndexed || (req.Context >= 0 && st.active <= uint64(req.Context)) {
		return recallScan(tx, sp, req)
	}
	return recallIndexed(tx, sp, st, req)
}

// recallScan ranks every live fact of the space. It keeps a copy of each
// ACTIVE record as it goes, so that the chosen facts are decoded without
// reading them again.
func recallScan(tx kv.Tx, sp Space, req RecallRequest) (Recall, error) {
	r := newRanking(req)
	prefix := spaceKey(sp)
	var rs liveRecords
	err := kv.Prefix(tx, bucketLive, prefix, func(k, v []byte) error {
		p, err := decodeProjection(len(prefix), k, v)
		if err != nil {
			return err
		}
		if !p.flagged {
			r.ref = len(rs.recs)
			rs.add(p.id, p.subject, v)
		}
		r.add(p.id, p.flagged, p.subject, p.category, p.value, p.said)
		return nil
	})
	if err != nil {
		return Recall{}, err
	}
	chosen, whole, err := r.choose()
	if err != nil {
		return Recall{}, err
	}
	// Only the chosen records are decoded.
	keep := make([]liveRec, len(chosen))
	for i, c := range chosen {
		keep[i] = rs.recs[c.ref]
	}
	rs.recs = keep
	var raw, jsubject string
	decoded, err := rs.facts(tx, sp, func(subject string) string {
		if subject != raw || jsubject == "" {
			raw, jsubject = subject, jsonString(subject)
		}
		return jsubject
	})
	if err != nil {
		return Recall{}, err
	}
	facts := make(map[uint64]*Fact, len(chosen))
	for i, c := range chosen {
		facts[c.id] = decoded[i]
	}
	return r.result(chosen, whole, facts), nil
}

// loadLive reads the live record of fact id of subject (as in the key).
func loadLive(tx kv.Tx, sp, jsp Space, subject []byte, id uint64) (*Fact, error) {
	k := append(append(spaceKey(sp), subject...), 0)
	v, err := tx.Get(bucketLive, append(k, kv.U64(id)...))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("memory: recall index of %s names #%d, which is not live", sp, id)
	}
	return liveFact(tx, sp, jsp, jsonString(string(subject)), id, v)
}

// recallIndexed ranks a space of more than Context active facts from its
// recall index. The facts that share no word with the question score 0
// and, unless critical, cannot be chosen, so they are never read: the
// scores come from the question words' postings (merged blocks, less the
// tombstoned facts, plus the pending entries), the critical facts from
// their categories', and only the chosen facts' records are read.
func recallIndexed(tx kv.Tx, sp Space, st indexState, req RecallRequest) (Recall, error) {
	sk := spaceKey(sp)
	last, err := LastID(tx, sp)
	if err != nil {
		return Recall{}, err
	}
	sc := newScores(last, st.active)
	toks := Tokens(req.Question)
	q := make(map[string]bool, len(toks))
	for _, t := range toks {
		q[t] = true
	}
	// The log: tombstoned facts, whose merged postings no longer count,
	// and pending facts, not merged yet.
	var tomb map[uint64]bool
	var critical []uint64
	pendingSubject := map[uint64]string{}
	prefix := tagKey(sk, tagLog)
	if err := kv.Prefix(tx, bucketRecall, prefix, func(k, v []byte) error {
		id, kind, err := parseLogKey(prefix, k)
		if err != nil {
			return err
		}
		if kind == logTomb {
			if tomb == nil {
				tomb = map[uint64]bool{}
			}
			tomb[id] = true
			return nil
		}
		subject, cv, err := splitPending(v)
		if err != nil {
			return err
		}
		pendingSubject[id] = string(subject)
		cat, err := scanContent(cv, func(w []byte, mask byte) {
			if q[string(w)] {
				sc.add(id, maskWeight[mask&7])
			}
		})
		if err != nil {
			return err
		}
		if len(cat) > 0 && req.Critical[string(cat)] {
			critical = append(critical, id)
		}
		return nil
	}); err != nil {
		return Recall{}, err
	}
	for c, on := range req.Critical {
		if !on || c == "" {
			continue // an empty category is never critical
		}
		if err := scanTerm(tx, termPrefix(sk, tagCat, c), func(id uint64, _ byte) {
			if !tomb[id] {
				critical = append(critical, id)
			}
		}); err != nil {
			return Recall{}, err
		}
	}
	if len(critical) > req.Budget {
		return Recall{}, overflow(len(critical), req)
	}
	for _, t := range toks {
		if err := scanTerm(tx, termPrefix(sk, tagWord, t), func(id uint64, mask byte) {
			if tomb == nil || !tomb[id] {
				sc.add(id, maskWeight[mask&7])
			}
		}); err != nil {
			return Recall{}, err
		}
	}
	// The Context best non-critical facts with a score, ties by id; then
	// every critical fact beside them.
	var isCritical map[uint64]bool
	if len(critical) > 0 {
		isCritical = make(map[uint64]bool, len(critical))
		for _, id := range critical {
			isCritical[id] = true
		}
	}
	top := topK{k: req.Context}
	sc.each(func(id uint64, score int32) {
		if !isCritical[id] {
			top.offer(candidate{id: id, score: int(score)})
		}
	})
	chosen := top.c
	for _, id := range critical {
		chosen = append(chosen, candidate{id: id, score: int(sc.get(id)), critical: true})
	}
	slices.SortFunc(chosen, func(a, b candidate) int {
		switch {
		case a.id == b.id:
			return 0
		case better(a, b):
			return -1
		}
		return 1
	})
	jsp := jsonSpace(sp)
	out := Recall{Active: int(st.active)}
	seen := map[string]bool{}
	for _, c := range chosen {
		subject := []byte(pendingSubject[c.id])
		if _, pending := pendingSubject[c.id]; !pending {
			if subject, err = tx.Get(bucketRecall, idKey(sk, tagSubject, c.id)); err != nil {
				return Recall{}, err
			}
			if subject == nil {
				return Recall{}, fmt.Errorf("memory: recall index of %s names #%d, which is not active", sp, c.id)
			}
		}
		f, err := loadLive(tx, sp, jsp, subject, c.id)
		if err != nil {
			return Recall{}, err
		}
		out.Facts = append(out.Facts, Recalled{Fact: f, Score: c.score, Critical: c.critical})
		if st.flagged == 0 || seen[f.Subject] {
			continue
		}
		seen[f.Subject] = true
		// As the scan does: the fact's subject (as JSON returns it) against
		// the subjects of the space's flagged facts.
		flagged, err := hasFlagged(tx, subjectPrefix(sp, f.Subject))
		if err != nil {
			return Recall{}, err
		}
		if flagged {
			out.FlaggedSubjects = append(out.FlaggedSubjects, f.Subject)
		}
	}
	return out, nil
}

// hasFlagged reports whether the live index holds a FLAGGED_CONFLICT fact
// under prefix (a subject's).
func hasFlagged(tx kv.Tx, prefix []byte) (bool, error) {
	found := false
	err := kv.Prefix(tx, bucketLive, prefix, func(_, v []byte) error {
		if len(v) > 1 && v[1] == liveFlagged {
			found = true
			return kv.ErrStop
		}
		return nil
	})
	return found, err
}

// better reports whether a ranks before b: by score, then by id.
func better(a, b candidate) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}

// topK keeps the k best candidates offered (better), as a heap whose root
// is the worst kept.
type topK struct {
	k int
	c []candidate
}

func (t *topK) offer(x candidate) {
	if t.k <= 0 {
		return
	}
	if len(t.c) < t.k {
		t.c = append(t.c, x)
		for i := len(t.c) - 1; i > 0; {
			p := (i - 1) / 2
			if !better(t.c[p], t.c[i]) {
				break
			}
			t.c[p], t.c[i] = t.c[i], t.c[p]
			i = p
		}
		return
	}
	if !better(x, t.c[0]) {
		return
	}
	t.c[0] = x
	for i := 0; ; {
		w, l, r := i, 2*i+1, 2*i+2
		if l < len(t.c) && better(t.c[w], t.c[l]) {
			w = l
		}
		if r < len(t.c) && better(t.c[w], t.c[r]) {
			w = r
		}
		if w == i {
			return
		}
		t.c[i], t.c[w] = t.c[w], t.c[i]
		i = w
	}
}

// scores accumulates the score of each fact id: in an array indexed by id
// when the space's ids are dense enough, else in a map.
type scores struct {
	dense  []int32
	sparse map[uint64]int32
}

func newScores(last, active uint64) *scores {
	if last < 1<<20 && last <= 8*active+4096 {
		return &scores{dense: make([]int32, last+1)}
	}
	return &scores{sparse: map[uint64]int32{}}
}

func (s *scores) add(id uint64, w int32) {
	if s.dense != nil && id < uint64(len(s.dense)) {
		s.dense[id] += w
		return
	}
	if s.sparse == nil {
		s.sparse = map[uint64]int32{}
	}
	s.sparse[id] += w
}

func (s *scores) get(id uint64) int32 {
	if s.dense != nil && id < uint64(len(s.dense)) {
		return s.dense[id]
	}
	return s.sparse[id]
}

// each calls fn for every id with a score above zero.
func (s *scores) each(fn func(id uint64, score int32)) {
	for id, v := range s.dense {
		if v > 0 {
			fn(uint64(id), v)
		}
	}
	for id, v := range s.sparse {
		if v > 0 {
			fn(id, v)
		}
	}
}
