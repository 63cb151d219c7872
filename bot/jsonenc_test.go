package bot

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// encodingJSON is what encoding/json's Encoder with SetEscapeHTML(false)
// writes for v, without the newline: what the HTTP edge always sent.
func encodingJSON(t testing.TB, v any) (string, error) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n"), err
}

var jsonStrings = []string{"", "plain", `"quoted" \back\slash/`, "<a href=x>&amp;</a>", "line\nbreak\ttab\r\b\f\x00\x01\x1f\x7f",
	"é 中 🙂", "\u2028\u2029", "invalid \xff\xfe utf-8 \xe2\x82", "\xed\xa0\x80 surrogate", strings.Repeat("ab", 300)}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonStrings {
		want, _ := encodingJSON(t, s)
		if got := string(AppendJSONString(nil, s)); got != want {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
	for _, ss := range [][]string{nil, {}, {"a"}, jsonStrings} {
		want, _ := encodingJSON(t, ss)
		if got := string(AppendJSONStrings(nil, ss)); got != want {
			t.Errorf("%q: got %s, want %s", ss, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := encodingJSON(t, s)
		if got := string(AppendJSONString([]byte("x"), s)); got != "x"+want {
			t.Fatalf("%q: got %s, want x%s", s, got, want)
		}
	})
}

var jsonFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.95, 0.1, 1.0 / 3, 1e-6, 9.99e-7, 1e-7, 1.5e-9, 1e20, 1e21, 123456789012345678901234.0, -2.5e-300,
	math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324, 100, 12345.678}

func TestAppendJSONFloatMatchesEncodingJSON(t *testing.T) {
	for _, x := range jsonFloats {
		checkFloat(t, x)
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := AppendJSONFloat(nil, x); err == nil {
			t.Errorf("AppendJSONFloat(%v): no error, want one", x)
		}
	}
}

func checkFloat(t *testing.T, x float64) {
	t.Helper()
	want, werr := encodingJSON(t, x)
	got, err := AppendJSONFloat(nil, x)
	if (err != nil) != (werr != nil) || (err == nil && string(got) != want) {
		t.Fatalf("%v: got %s (%v), want %s (%v)", x, got, err, want, werr)
	}
}

func FuzzAppendJSONFloat(f *testing.F) {
	for _, x := range jsonFloats {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) { checkFloat(t, math.Float64frombits(bits)) })
}

func checkTime(t *testing.T, tm time.Time) {
	t.Helper()
	want, werr := encodingJSON(t, tm)
	got, err := AppendJSONTime(nil, tm)
	if (err != nil) != (werr != nil) || (err == nil && string(got) != want) {
		t.Fatalf("%v: got %s (%v), want %s (%v)", tm, got, err, want, werr)
	}
}

func TestAppendJSONTimeMatchesEncodingJSON(t *testing.T) {
	for _, tm := range []time.Time{{}, time.Date(2026, 12, 1, 16, 6, 50, 956354408, time.UTC), time.Date(2026, 12, 1, 16, 6, 50, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 5*3600+30*60)), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("y", 24*3600)), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("z", 61))} {
		checkTime(t, tm)
	}
}

func FuzzAppendJSONTime(f *testing.F) {
	f.Add(int64(1764605210), int64(956354408), int32(0))
	f.Add(int64(-62135596800), int64(0), int32(3600))
	f.Fuzz(func(t *testing.T, sec, nsec int64, off int32) {
		checkTime(t, time.Unix(sec, nsec).In(time.FixedZone("f", int(off%(30*3600)))))
	})
}

// The envelope: {"text":…,"data":…}, as encoding/json writes a Result.
type appenderData struct {
	A string   `json:"a"`
	B []string `json:"b"`
}

func (d appenderData) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"a":`...)
	dst = AppendJSONString(dst, d.A)
	dst = append(dst, `,"b":`...)
	dst = AppendJSONStrings(dst, d.B)
	return append(dst, '}'), nil
}

func TestAppendResultJSON(t *testing.T) {
	for _, r := range []Result{{Text: "✅ SAFE <to act>\n• x", Data: appenderData{A: "\u2028", B: []string{"&"}}}, {Data: appenderData{}}} {
		want, _ := encodingJSON(t, r)
		got, ok, err := AppendResultJSON(nil, r)
		if !ok || err != nil || string(got) != want {
			t.Fatalf("got %s (%v %v), want %s", got, ok, err, want)
		}
	}
	if _, ok, _ := AppendResultJSON(nil, Result{Text: "x", Data: map[string]any{"a": 1}}); ok {
		t.Fatal("a map was appended")
	}
}
