package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// bucketIdempotency holds one record per principal and key:
// principal id 0x00 Idempotency-Key -> idemRecord JSON.
const bucketIdempotency = "idempotency"

// IdempotencyTTL is how long a key is remembered. A key reused after that
// starts a new request.
const IdempotencyTTL = 24 * time.Hour

// maxIdempotencyKey is the longest key accepted, as Stripe's.
const maxIdempotencyKey = 255

// Idempotency replays the recorded answer of a write tool call retried with
// the same Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header):
// the same key with the same arguments gets the first answer again, status
// and body; the same key with other arguments gets 422; a retry while the
// first call is still running gets 409. Keys are scoped per principal and
// kept IdempotencyTTL. Read and verify tools ignore the header: they change
// nothing.
type Idempotency struct {
	store   kv.Store
	now     func() time.Time
	isWrite func(tool string) bool
	maxBody int64
	log     *slog.Logger
	replay  func()
	boot    string // identifies this process: a claim left by another one is abandoned
}

// IdempotencyOptions configure NewIdempotency.
type IdempotencyOptions struct {
	Store kv.Store
	Now   func() time.Time // nil: time.Now
	// IsWrite reports whether a tool changes state (its capability is not
	// read or verify); only those take part.
	IsWrite func(tool string) bool
	MaxBody int64 // bytes; larger bodies get 413
	Logger  *slog.Logger
	// OnReplay, if set, is told each time an answer is replayed.
	OnReplay func()
}

// NewIdempotency returns the Idempotency-Key layer.
func NewIdempotency(o IdempotencyOptions) *Idempotency {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	if o.OnReplay == nil {
		o.OnReplay = func() {}
	}
	return &Idempotency{store: o.Store, now: o.Now, isWrite: o.IsWrite, maxBody: o.MaxBody, log: o.Logger, replay: o.OnReplay, boot: hex.EncodeToString(b[:])}
}

// idemRecord is what is kept of one keyed request.
type idemRecord struct {
	Fingerprint string `json:"fp"`
	Done        bool   `json:"done"`
	Boot        string `json:"boot,omitempty"` // the process running it, while not done
	Created     int64  `json:"created"`        // unix seconds
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Body        []byte `json:"body,omitempty"`
}

// Middleware wraps the tool-call handler (after authentication).
func (m *Idempotency) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		tool := r.PathValue("name")
		caller := CallerFrom(r.Context())
		if key == "" || caller == nil || m.isWrite == nil || !m.isWrite(tool) {
			next.ServeHTTP(w, r)
			return
		}
		key, err := parseIdempotencyKey(key)
		if err != nil {
			WriteError(w, r, m.log, err)
			return
		}
		body, err := readBody(w, r, m.maxBody)
		if err != nil {
			WriteError(w, r, m.log, err)
			return
		}
		dbKey := kv.Join([]byte(caller.ID), []byte(key))
		fp := fingerprint(tool, body)
		prior, err := m.claim(r.Context(), dbKey, fp)
		if err != nil {
			WriteError(w, r, m.log, err)
			return
		}
		if prior != nil {
			m.replay()
			w.Header().Set("Content-Type", prior.ContentType)
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(prior.Status)
			_, _ = w.Write(prior.Body)
			return
		}

		rec := &recorder{header: http.Header{}}
		r.Body = http.NoBody
		if len(body) > 0 {
			r.Body = readCloser{bytes.NewReader(body)}
		}
		r.ContentLength = int64(len(body))
		next.ServeHTTP(rec, r)

		// Finish even when the client has gone: the answer is what a retry
		// must get.
		ctx := context.WithoutCancel(r.Context())
		if err := m.finish(ctx, dbKey, fp, rec); err != nil {
			m.log.Error("idempotency: could not record the answer", "request_id", RequestID(ctx), "err", err)
		}
		for k, vs := range rec.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.status())
		_, _ = w.Write(rec.body.Bytes())
	})
}

// claim records key as in flight, or returns the recorded answer to replay.
// A conflicting use of the key is an error (422 or 409).
func (m *Idempotency) claim(ctx context.Context, dbKey []byte, fp string) (*idemRecord, error) {
	now := m.now()
	var prior *idemRecord
	err := m.store.Update(ctx, func(tx kv.Tx) error {
		prior = nil // the function may run twice under group commit
		b, err := tx.Get(bucketIdempotency, dbKey)
		if err != nil {
			return err
		}
		if b != nil {
			var old idemRecord
			if json.Unmarshal(b, &old) == nil && now.Sub(time.Unix(old.Created, 0)) < IdempotencyTTL {
				switch {
				case old.Fingerprint != fp:
					return bot.Errorf(bot.KindUnprocessable, "this Idempotency-Key was already used with other arguments; use a new key for a new request")
				case old.Done:
					prior = &old
					return nil
				case old.Boot == m.boot:
					return bot.Errorf(bot.KindConflict, "a request with this Idempotency-Key is still being processed; retry when it has finished")
				}
				// In flight in a process that has since stopped: it never
				// answered, so this retry runs it.
			}
		}
		nb, err := json.Marshal(idemRecord{Fingerprint: fp, Boot: m.boot, Created: now.Unix()})
		if err != nil {
			return err
		}
		return tx.Put(bucketIdempotency, dbKey, nb)
	})
	return prior, err
}

// finish records the answer for replay, or releases the key when the
// request should be retried as new: a bad request, a rate limit, or a fault
// of Countersign's (nothing was applied, or the client must look).
func (m *Idempotency) finish(ctx context.Context, dbKey []byte, fp string, rec *recorder) error {
	status := rec.status()
	keep := status < 500 && status != http.StatusBadRequest && status != http.StatusUnauthorized &&
		status != http.StatusRequestEntityTooLarge && status != http.StatusTooManyRequests
	return m.store.Update(ctx, func(tx kv.Tx) error {
		if !keep {
			return tx.Delete(bucketIdempotency, dbKey)
		}
		b, err := json.Marshal(idemRecord{
			Fingerprint: fp, Done: true, Created: m.now().Unix(), Status: status,
			ContentType: rec.header.Get("Content-Type"), Body: redactKeys(rec.body.Bytes()),
		})
		if err != nil {
			return err
		}
		return tx.Put(bucketIdempotency, dbKey, b)
	})
}

// Prune forgets keys older than IdempotencyTTL, at most 1000 per call so
// that the write lock is held briefly. It is a sweep step.
func (m *Idempotency) Prune(ctx context.Context, now time.Time) (int, error) {
	cutoff := now.Add(-IdempotencyTTL).Unix()
	var old [][]byte
	err := m.store.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend(bucketIdempotency, nil, nil, func(k, v []byte) error {
			var r idemRecord
			if json.Unmarshal(v, &r) != nil || r.Created < cutoff {
				old = append(old, bytes.Clone(k))
				if len(old) >= 1000 {
					return kv.ErrStop
				}
			}
			return nil
		})
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	err = m.store.Update(ctx, func(tx kv.Tx) error {
		for _, k := range old {
			if err := tx.Delete(bucketIdempotency, k); err != nil {
				return err
			}
		}
		return nil
	})
	return len(old), err
}

// parseIdempotencyKey accepts the key bare or as a structured-header string
// ("..."): 1 to 255 printable ASCII characters.
func parseIdempotencyKey(k string) (string, error) {
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	if k == "" || len(k) > maxIdempotencyKey || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return "", bot.Invalid("Idempotency-Key", "must be 1 to %d printable ASCII characters (a UUID is a good key)", maxIdempotencyKey)
	}
	return k, nil
}

// fingerprint identifies a request's tool and arguments. A JSON body is
// fingerprinted in canonical form (sorted keys, no spacing, numbers as
// written), so a client that re-encodes the same arguments still matches.
func fingerprint(tool string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil && !dec.More() {
		if canon, err := json.Marshal(v); err == nil {
			h.Write([]byte("json:"))
			h.Write(canon)
			return hex.EncodeToString(h.Sum(nil))
		}
	}
	h.Write([]byte("raw:"))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// apiKeyRE matches an API key in an answer (create_principal's).
var apiKeyRE = regexp.MustCompile(regexp.QuoteMeta(bot.KeyPrefix) + `[A-Za-z0-9_-]{16,}`)

// redactKeys removes API keys from an answer before it is stored: a key is
// shown once and never kept, so a replay shows that it was withheld.
func redactKeys(body []byte) []byte {
	return apiKeyRE.ReplaceAll(body, []byte(bot.KeyPrefix+"(withheld: a key is shown once; revoke this principal and create another if it was lost)"))
}

// recorder buffers a handler's answer.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
