// Package httpstatus records the status an http.Handler wrote, for the
// edges that report it: the webhook server's request metrics and the
// tracing middleware's server spans. It imports nothing of Countersign,
// so that every adapter may share it (as adapters/jwks).
package httpstatus

import "net/http"

// Recorder is an http.ResponseWriter that remembers the first status its
// handler wrote. It passes flushes on (streamed answers: MCP, SSE) and
// unwraps for http.ResponseController (deadlines, hijacking).
type Recorder struct {
	http.ResponseWriter
	code int
}

// Wrap returns a Recorder writing to w.
func Wrap(w http.ResponseWriter) *Recorder { return &Recorder{ResponseWriter: w} }

// WriteHeader records code, unless a status was already written, and
// writes it.
func (r *Recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write writes b; a body written without a status is a 200, as net/http
// sends it.
func (r *Recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Status is the status written: 200 when the handler wrote none, as
// net/http answers then.
func (r *Recorder) Status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush implements http.Flusher when the wrapped writer does.
func (r *Recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
