package memory

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// The live index (bucketLive) holds, for every ACTIVE and FLAGGED_CONFLICT
// fact, a binary record of the fact, so that the hot paths (the gates'
// Live, recall) never decode JSON. The fact's JSON in bucketFacts stays the
// record of truth; the live record is derived from the same Fact in the
// same put and decodes to exactly what json.Unmarshal of that JSON gives.
//
// A live-index value is versioned and extensible:
//
//	projection  version (1), status (1 ACTIVE, 2 FLAGGED), then the
//	            category, value and said, each a uvarint length and bytes:
//	            what recall ranks, and all that stores written before the
//	            record held. A reader that knows only this ignores the rest
//	            (as the previous version does, so it still reads a store
//	            written by this one).
//	record      after the projection: the record's version (3), then every
//	            other field of the fact (encodeRecord). Version 2, which a
//	            store written before decisions carried their assurance
//	            holds, is the same without the assurance, and is still
//	            read (its facts' JSON has none either); a reader that knows
//	            only version 2 reads a version 3 entry from the fact's JSON.
//
// An entry without a record of a known version (an older store's) is read
// from the fact's JSON instead; the first write to a space rewrites its
// entries with their records (see buildIndex).
const (
	projectionVersion = 1
	recordVersion     = 3
	// recordVersion2 is the record without the decision's assurance.
	recordVersion2 = 2
)

// Status bytes of a live-index value.
const (
	liveActive  = 1
	liveFlagged = 2
)

// Flag bits of a record.
const (
	recArchived  = 1 << 0
	recTombstone = 1 << 1
)

// jsonString is s as encoding/json stores and returns it: each byte of s
// that is not part of valid UTF-8 becomes U+FFFD. Every other string comes
// back unchanged.
func jsonString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// jsonSpace is the space as encoding/json stores and returns it.
func jsonSpace(sp Space) Space {
	return Space{UserID: jsonString(sp.UserID), AgentID: jsonString(sp.AgentID), RunID: jsonString(sp.RunID)}
}

// jsonMetadata is the metadata as json.Marshal of the fact stores it (and
// json.Unmarshal returns it): compacted, with <, >, & and U+2028/9 escaped.
func jsonMetadata(m json.RawMessage) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// A time in a record is a kind byte, then its value:
const (
	timeNone = 0 // the zero time of an omitzero field (JSON omits it)
	timeUTC  = 1 // at offset 0: 8 bytes of Unix seconds, 4 of nanoseconds (JSON writes "Z" and reads it back as UTC)
	timeText = 2 // any other: a length byte and the text Time.MarshalJSON writes
)

func appendTime(b []byte, t time.Time, omitZero bool) ([]byte, error) {
	if omitZero && t.IsZero() {
		return append(b, timeNone), nil
	}
	if _, off := t.Zone(); off == 0 {
		if y := t.Year(); y < 0 || y > 9999 {
			return nil, fmt.Errorf("memory: time %v: year outside of range [0,9999]", t)
		}
		b = append(b, timeUTC)
		b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
		return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond())), nil
	}
	b = append(b, timeText, 0)
	n := len(b)
	b, err := t.AppendText(b) // at most 35 bytes
	if err != nil {
		return nil, err
	}
	b[n-1] = byte(len(b) - n)
	return b, nil
}

// encodeRecord is f's live-index value, with its record. f must be live.
func encodeRecord(f *Fact) ([]byte, error) {
	st := byte(liveActive)
	switch f.Status {
	case StatusActive:
	case StatusFlagged:
		st = liveFlagged
	default:
		return nil, fmt.Errorf("memory: #%d is %s, not live", f.ID, f.Status)
	}
	meta, err := jsonMetadata(f.Metadata)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 128+len(f.Category)+len(f.Value)+len(f.Said)+len(f.SetBy)+len(meta))
	b = append(b, projectionVersion, st)
	for _, s := range [...]string{f.Category, f.Value, f.Said} {
		b = appendString(b, jsonString(s))
	}
	b = append(b, recordVersion)
	for _, s := range [...]string{f.Scope, string(f.Kind), f.Source, f.SetBy,
		string(f.Pending), f.Held, f.ProposerID, f.ProposerName, string(f.Resolved), f.DecidedBy, f.Note, f.Reason, f.Target, string(f.Assurance)} {
		b = appendString(b, jsonString(s))
	}
	b = binary.AppendUvarint(b, uint64(len(meta)))
	b = append(b, meta...)
	if b, err = appendTime(b, f.SetAt, false); err != nil {
		return nil, err
	}
	for _, t := range [...]time.Time{f.RetiredAt, f.ProposedAt, f.DecidedAt} {
		if b, err = appendTime(b, t, true); err != nil {
			return nil, err
		}
	}
	b = binary.AppendUvarint(b, f.Supersedes)
	b = binary.AppendUvarint(b, f.ItemID)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(f.Confidence))
	var flags byte
	if f.Archived {
		flags |= recArchived
	}
	if f.Tombstone {
		flags |= recTombstone
	}
	return append(b, flags), nil
}

var errRecord = errors.New("memory: malformed live-index record")

// uvarint is binary.Uvarint over a string or a byte slice.
func uvarint[T string | []byte](v T) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(v); i++ {
		if i == binary.MaxVarintLen64 {
			return 0, -(i + 1) // overflow
		}
		c := v[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1) // overflow
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// recordReader reads a live-index value (or an index entry) front to back.
type recordReader[T string | []byte] struct {
	v   T
	off int
	err error
}

func (r *recordReader[T]) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	n, w := uvarint(r.v[r.off:])
	if w <= 0 {
		r.err = errRecord
		return 0
	}
	r.off += w
	return n
}

// span returns the bounds of the next length-prefixed field.
func (r *recordReader[T]) span() (int, int) {
	n := r.uvarint()
	if r.err != nil {
		return 0, 0
	}
	if n > uint64(len(r.v)-r.off) {
		r.err = errRecord
		return 0, 0
	}
	start := r.off
	r.off += int(n)
	return start, r.off
}

// decodeRecord decodes the record of a live-index value of fact id, whose
// space and subject are given as stored in the key (they are not repeated
// in the value). The result equals what json.Unmarshal of the fact's JSON
// gives.
func decodeRecord(sp Space, subject string, id uint64, v []byte) (*Fact, error) {
	f := &Fact{}
	if err := decodeRecordInto(f, sp, subject, id, string(v)); err != nil {
		return nil, err
	}
	return f, nil
}

// decodeRecordInto is decodeRecord into a zero f, from the value as a
// string: the text fields are substrings of it, so that many records can
// share one allocation.
func decodeRecordInto(f *Fact, sp Space, subject string, id uint64, v string) error {
	if len(v) < 2 || v[0] != projectionVersion {
		return errRecord
	}
	f.V, f.ID, f.Space, f.Subject = factVersion, id, sp, subject
	switch v[1] {
	case liveActive:
		f.Status = StatusActive
	case liveFlagged:
		f.Status = StatusFlagged
	default:
		return errRecord
	}
	r := recordReader[string]{v: v, off: 2}
	str := func() string {
		a, b := r.span()
		return v[a:b]
	}
	f.Category, f.Value, f.Said = str(), str(), str()
	if r.err != nil || r.off >= len(v) || v[r.off] != recordVersion && v[r.off] != recordVersion2 {
		return errRecord
	}
	version := v[r.off]
	r.off++
	f.Scope, f.Kind, f.Source, f.SetBy = str(), Kind(str()), str(), str()
	f.Pending, f.Held, f.ProposerID, f.ProposerName = Action(str()), str(), str(), str()
	f.Resolved, f.DecidedBy, f.Note, f.Reason, f.Target = Resolution(str()), str(), str(), str(), str()
	if version == recordVersion {
		f.Assurance = policy.Assurance(str())
	}
	if a, b := r.span(); b > a {
		f.Metadata = json.RawMessage(v[a:b])
	}
	for _, t := range [...]*time.Time{&f.SetAt, &f.RetiredAt, &f.ProposedAt, &f.DecidedAt} {
		if r.err != nil || r.off >= len(v) {
			return errRecord
		}
		kind := v[r.off]
		r.off++
		switch {
		case kind == timeNone:
		case kind == timeUTC && len(v)-r.off >= 12:
			sec := int64(binary.BigEndian.Uint64([]byte(v[r.off : r.off+8])))
			nsec := int64(binary.BigEndian.Uint32([]byte(v[r.off+8 : r.off+12])))
			*t = time.Unix(sec, nsec).UTC()
			r.off += 12
		case kind == timeText && len(v)-r.off >= 1 && int(v[r.off]) < len(v)-r.off:
			n := int(v[r.off])
			// What Time.UnmarshalJSON does with the text MarshalJSON wrote.
			var err error
			if *t, err = time.Parse(time.RFC3339Nano, v[r.off+1:r.off+1+n]); err != nil {
				return fmt.Errorf("memory: live-index record #%d: %w", id, err)
			}
			r.off += 1 + n
		default:
			return errRecord
		}
	}
	f.Supersedes = r.uvarint()
	f.ItemID = r.uvarint()
	if r.err != nil || len(v)-r.off != 9 {
		return fmt.Errorf("memory: malformed live-index record #%d", id)
	}
	f.Confidence = math.Float64frombits(binary.BigEndian.Uint64([]byte(v[r.off : r.off+8])))
	flags := v[r.off+8]
	f.Archived, f.Tombstone = flags&recArchived != 0, flags&recTombstone != 0
	return nil
}

// hasRecord reports whether a live-index value holds a record this version
// reads (else the fact is read from its JSON).
func hasRecord(v []byte) bool {
	if len(v) < 2 || v[0] != projectionVersion {
		return false
	}
	r := recordReader[[]byte]{v: v, off: 2}
	r.span()
	r.span()
	r.span()
	return r.err == nil && r.off < len(v) && (v[r.off] == recordVersion || v[r.off] == recordVersion2)
}

// liveFact returns the fact of a live-index entry: decoded from the
// record, or (an entry of an older version) loaded from its JSON. sp and
// subject are as in the key; jsp and jsubject the same as JSON returns
// them.
func liveFact(tx kv.Tx, sp, jsp Space, jsubject string, id uint64, v []byte) (*Fact, error) {
	if hasRecord(v) {
		return decodeRecord(jsp, jsubject, id, v)
	}
	f, err := Load(tx, sp, id)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("memory: live index of %s names #%d, which does not exist", sp, id)
	}
	return f, nil
}
