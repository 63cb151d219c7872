// Package logwriter batches a process's log lines into few writes: under
// load many lines share one system call instead of paying one each, while
// a warning or an error, and every line queued before it, is written
// before its call returns (Flushing), and Close writes what is left.
package logwriter

import (
	"context"
	"io"
	"log/slog"
	"sync"
)

// maxLogBacklog bounds the log bytes waiting for the writer; past it a
// line is written at once by its caller (the log slows the call down
// rather than grow without bound).
const maxLogBacklog = 1 << 20

// Writer batches log lines: Write appends to a buffer and a background
// goroutine writes whatever has gathered in one write. Under load many
// lines share one system call instead of paying one each; idle, a line
// goes out as soon as the goroutine runs. Flush writes the backlog now
// (warnings and errors are flushed before their call returns, see
// Flushing); Close flushes and stops.
type Writer struct {
	out io.Writer

	mu     sync.Mutex
	buf    []byte
	closed bool
	kick   chan struct{}
	done   chan struct{}
	wmu    sync.Mutex // serialises writes to out, so lines never interleave
}

// New returns a Writer of out and starts its background writer; Close
// stops it.
func New(out io.Writer) *Writer {
	w := &Writer{out: out, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go w.loop()
	return w
}

// Write queues p (one log record) for the writer.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed || len(w.buf)+len(p) > maxLogBacklog {
		w.mu.Unlock()
		w.Flush()
		w.wmu.Lock()
		defer w.wmu.Unlock()
		return w.out.Write(p)
	}
	w.buf = append(w.buf, p...)
	select { // under mu: Close cannot close kick meanwhile
	case w.kick <- struct{}{}:
	default:
	}
	w.mu.Unlock()
	return len(p), nil
}

// Flush writes every queued line before it returns.
func (w *Writer) Flush() {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	b := w.buf
	w.buf = nil
	w.mu.Unlock()
	if len(b) > 0 {
		_, _ = w.out.Write(b)
	}
}

func (w *Writer) loop() {
	defer close(w.done)
	for range w.kick {
		w.Flush()
	}
}

// Close writes what is queued and stops the writer; later lines are
// written directly.
func (w *Writer) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.kick)
	w.mu.Unlock()
	<-w.done
	w.Flush()
}

// Flushing returns h (a handler writing to w) so that a record of level
// Warn or above, and every line queued before it, is written before its
// call returns: a problem is never left in a buffer.
func Flushing(h slog.Handler, w *Writer) slog.Handler { return flushingHandler{h, w} }

// flushingHandler is Flushing's handler.
type flushingHandler struct {
	slog.Handler
	w *Writer
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.w.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flushingHandler{h.Handler.WithAttrs(as), h.w}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{h.Handler.WithGroup(name), h.w}
}
