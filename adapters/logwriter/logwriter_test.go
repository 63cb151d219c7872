package logwriter

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is an io.Writer safe for concurrent use that counts writes.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestLogWriterKeepsEveryLineWhole(t *testing.T) {
	t.Parallel()
	out := &lockedBuffer{}
	w := New(out)
	log := slog.New(Flushing(slog.NewTextHandler(w, nil), w))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				log.Info("tool call", "g", g, "i", i)
			}
		}()
	}
	wg.Wait()
	w.Close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4000 {
		t.Fatalf("%d lines, want 4000", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "time=") || !strings.Contains(l, `msg="tool call"`) {
			t.Fatalf("a torn line: %q, want a whole line starting %q with %s", l, "time=", `msg="tool call"`)
		}
		seen[l[strings.Index(l, "g="):]] = true
	}
	if len(seen) != 4000 {
		t.Fatalf("%d distinct lines, want 4000", len(seen))
	}
	// A line after Close is still written, directly.
	log.Info("late")
	if !strings.Contains(out.String(), `msg=late`) {
		t.Fatal("a line after Close was lost")
	}
}

func TestLogWriterFlushesWarningsBeforeReturning(t *testing.T) {
	t.Parallel()
	out := &lockedBuffer{}
	w := New(out)
	defer w.Close()
	log := slog.New(Flushing(slog.NewTextHandler(w, nil), w))
	for i := range 3 {
		log.Info(fmt.Sprintf("info %d", i))
	}
	log.Error("disk on fire")
	// No waiting: the error and every line before it are out.
	s := out.String()
	for _, want := range []string{"info 0", "info 1", "info 2", "disk on fire"} {
		if !strings.Contains(s, want) {
			t.Fatalf("%q not written when Error returned:\n%s", want, s)
		}
	}
}
