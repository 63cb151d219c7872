package httpstatus

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRecorderKeepsTheFirstStatus(t *testing.T) {
	cases := []struct {
		name    string
		handler func(w http.ResponseWriter)
		want    int
	}{
		{"nothing written", func(http.ResponseWriter) {}, http.StatusOK},
		{"a body without a status", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "hi") }, http.StatusOK},
		{"a status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusTeapot) }, http.StatusTeapot},
		{"two statuses", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			w.WriteHeader(http.StatusInternalServerError)
		}, http.StatusNotFound},
		{"a body, then a status", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "hi"); w.WriteHeader(http.StatusBadRequest) }, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Wrap(httptest.NewRecorder())
			c.handler(r)
			if got := r.Status(); got != c.want {
				t.Errorf("Status() = %d, want %d", got, c.want)
			}
		})
	}
}

func TestRecorderFlushesAndUnwraps(t *testing.T) {
	under := httptest.NewRecorder()
	r := Wrap(under)
	_, _ = io.WriteString(r, "part")
	r.Flush()
	if !under.Flushed {
		t.Errorf("Flush did not reach the wrapped writer: Flushed = false, want true")
	}
	// http.ResponseController finds the wrapped writer through Unwrap: a
	// recorder has no deadlines, so the error must be ErrNotSupported
	// from the wrapped writer rather than a failure to find one.
	if got := r.Unwrap(); got != under {
		t.Errorf("Unwrap() = %v, want the wrapped writer", got)
	}
	if err := http.NewResponseController(r).Flush(); err != nil {
		t.Errorf("ResponseController.Flush through the recorder: %v, want nil", err)
	}
}
