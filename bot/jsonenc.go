package bot

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/countersign/countersign/approvals"
)

// JSONAppender is an answer's data that writes its own JSON, without
// reflection: exactly the bytes encoding/json's Encoder, with
// SetEscapeHTML(false), writes for the same value (without the newline).
// The HTTP edge uses it for the hot tools' answers; a test of each
// implementation compares it with encoding/json, byte for byte.
type JSONAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// AppendResultJSON appends the JSON of r ({"text":…,"data":…}) to dst
// when its data is a JSONAppender; ok is false otherwise, and the caller
// encodes r with encoding/json.
func AppendResultJSON(dst []byte, r Result) (out []byte, ok bool, err error) {
	a, ok := r.Data.(JSONAppender)
	if !ok {
		return dst, false, nil
	}
	dst = append(dst, `{"text":`...)
	dst = AppendJSONString(dst, r.Text)
	dst = append(dst, `,"data":`...)
	if dst, err = a.AppendJSON(dst); err != nil {
		return nil, true, err
	}
	return append(dst, '}'), true, nil
}

// AppendJSONString appends s as a JSON string, as encoding/json writes it
// without HTML escaping: invalid UTF-8 becomes \ufffd, control characters
// are escaped (\b \f \n \r \t, else \u00XX), and so are U+2028 and U+2029.
// It is the audit chain's encoder (approvals.AppendJSONString) with HTML
// escaping off, so the two cannot drift.
func AppendJSONString(dst []byte, s string) []byte {
	return approvals.AppendJSONString(dst, s, false)
}

// AppendJSONStrings appends ss as a JSON array of strings (null when nil).
func AppendJSONStrings(dst []byte, ss []string) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, s)
	}
	return append(dst, ']')
}

// errJSONFloat is a float JSON cannot hold.
var errJSONFloat = errors.New("json: unsupported value: NaN or infinite float")

// AppendJSONFloat appends f as encoding/json writes a float64: the
// shortest decimal that reads back as f, in exponent form below 1e-6 and
// from 1e21 on. NaN and infinities are an error, as there.
func AppendJSONFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errJSONFloat
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' { // e-09 becomes e-9, as encoding/json writes it
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// AppendJSONTime appends t as time.Time's MarshalJSON writes it (RFC 3339
// with nanoseconds, quoted), failing where it fails (a year outside
// 0–9999, an offset of 24 hours or more).
func AppendJSONTime(dst []byte, t time.Time) ([]byte, error) {
	dst, err := t.AppendText(append(dst, '"'))
	if err != nil {
		return nil, err
	}
	return append(dst, '"'), nil
}
