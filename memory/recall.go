package memory

import (
	"fmt"
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

// field scores one field: weight for each distinct question word in text.
func (s *scorer) field(text []byte, weight int) int {
	if len(s.q) == 0 || len(text) == 0 {
		return 0
	}
	clear(s.hit)
	n := 0
	flush := func() {
		if len(s.buf) > 0 {
			if i, ok := s.q[string(s.buf)]; ok && !s.hit[i] {
				s.hit[i] = true
				n += weight
			}
			s.buf = s.buf[:0]
		}
	}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				s.buf = append(s.buf, c)
			case 'A' <= c && c <= 'Z':
				s.buf = append(s.buf, c+'a'-'A')
			default:
				flush()
			}
			continue
		}
		r, w := utf8.DecodeRune(text[i:])
		i += w
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			s.buf = utf8.AppendRune(s.buf, unicode.ToLower(r))
		} else {
			flush()
		}
	}
	flush()
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

// candidate is an ACTIVE fact being ranked.
type candidate struct {
	id       uint64
	score    int
	critical bool
}

// ranking accumulates the candidates of one recall.
type ranking struct {
	req      RecallRequest
	sc       *scorer
	cands    []candidate
	flagged  map[string]bool
	critical int
}

func newRanking(req RecallRequest) *ranking {
	return &ranking{req: req, sc: newScorer(req.Question), flagged: map[string]bool{}}
}

func (r *ranking) add(id uint64, flagged bool, subject, category, value, said []byte) {
	if flagged {
		r.flagged[string(subject)] = true
		return
	}
	c := candidate{id: id, score: r.sc.score(subject, value, said), critical: isCritical(r.req.Critical, category)}
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
		cats := make([]string, 0, len(r.req.Critical))
		for c := range r.req.Critical {
			cats = append(cats, c)
		}
		sort.Strings(cats)
		return nil, false, &CriticalOverflowError{Count: r.critical, Budget: r.req.Budget, Categories: cats}
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

// RecallSpace ranks the space's live facts for a question: one prefix scan
// of the live index (no JSON decoded), then only the chosen facts are
// loaded.
func RecallSpace(tx kv.Tx, sp Space, req RecallRequest) (Recall, error) {
	r := newRanking(req)
	prefix := sp.key()
	err := kv.Prefix(tx, bucketLive, prefix, func(k, v []byte) error {
		p, err := decodeProjection(len(prefix), k, v)
		if err != nil {
			return err
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
	facts := make(map[uint64]*Fact, len(chosen))
	for _, c := range chosen {
		f, err := Load(tx, sp, c.id)
		if err != nil {
			return Recall{}, err
		}
		if f == nil {
			return Recall{}, fmt.Errorf("memory: live index of %s names #%d, which does not exist", sp, c.id)
		}
		facts[c.id] = f
	}
	return r.result(chosen, whole, facts), nil
}
