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

// Idempotency buckets.
const (
	// bucketIdempotency holds one record per principal and key:
	// principal id 0x00 Idempotency-Key -> idemRecord JSON.
	bucketIdempotency = "idempotency"
	// bucketIdempotencyAt indexes the records by the time they were
	// written (bot.ExpiryIndex).
	bucketIdempotencyAt = "idempotency_due"
)

// DefaultIdempotencyTTL is how long a key is remembered unless
// IdempotencyOptions.TTL says otherwise (retention.idempotency). A key
// reused after that starts a new request.
const DefaultIdempotencyTTL = 7 * 24 * time.Hour

// MinIdempotencyTTL is the shortest TTL accepted: a client retrying a
// request within a day must get its first answer.
const MinIdempotencyTTL = 24 * time.Hour

// idemIndex finds idempotency records by the time they were written.
var idemIndex = bot.ExpiryIndex{Bucket: bucketIdempotency, Index: bucketIdempotencyAt, Written: func(v []byte) (time.Time, bool) {
	var r idemRecord
	if json.Unmarshal(v, &r) != nil {
		return time.Time{}, false
	}
	return time.Unix(r.Created, 0), true
}}

// maxIdempotencyKey is the longest key accepted, as Stripe's.
const maxIdempotencyKey = 255

// Idempotency replays the recorded answer of a write tool call retried with
// the same Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header):
// the same key with the same arguments gets the first answer again, status
// and body; the same key with other arguments gets 422; a retry while the
// first call is still running gets 409. Keys are scoped per principal and
// kept for the TTL. Read and verify tools ignore the header: they change
// nothing.
type Idempotency struct {
	store   kv.Store
	now     func() time.Time
	isWrite func(tool string) bool
	maxBody int64
	log     *slog.Logger
	replay  func()
	boot    string // identifies this process: a claim left by another one is abandoned
	ttl     time.Duration
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
	// TTL is how long a key is remembered; 0 means DefaultIdempotencyTTL.
	TTL time.Duration
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
	if o.TTL <= 0 {
		o.TTL = DefaultIdempotencyTTL
	}
	return &Idempotency{store: o.Store, now: o.Now, isWrite: o.IsWrite, maxBody: o.MaxBody, log: o.Logger, replay: o.OnReplay, boot: hex.EncodeToString(b[:]), ttl: o.TTL}
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
			r.Body = &bufferedBody{Reader: bytes.NewReader(body), b: body}
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
			if json.Unmarshal(b, &old) == nil && now.Sub(time.Unix(old.Created, 0)) < m.ttl {
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
		if err := tx.Put(bucketIdempotency, dbKey, nb); err != nil {
			return err
		}
		return idemIndex.Add(tx, now, dbKey)
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
			return tx.Delete(bucketIdempotency, dbKey) // its index entry goes when reached
		}
		now := m.now()
		b, err := json.Marshal(idemRecord{
			Fingerprint: fp, Done: true, Created: now.Unix(), Status: status,
			ContentType: rec.header.Get("Content-Type"), Body: redactKeys(rec.body.Bytes()),
		})
		if err != nil {
			return err
		}
		if err := tx.Put(bucketIdempotency, dbKey, b); err != nil {
			return err
		}
		return idemIndex.Add(tx, now, dbKey)
	})
}

// Prune forgets keys written more than the TTL before now, in batches of
// bot.RetentionBatch, found through their time index (records written
// before the index existed are indexed first, once). It is a sweep step.
func (m *Idempotency) Prune(ctx context.Context, now time.Time) (int, error) {
	return bot.PruneExpired(ctx, m.store, idemIndex, now, m.ttl)
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
	body = apiKeyRE.ReplaceAll(body, []byte(bot.KeyPrefix+"(withheld: a key is shown once; revoke this principal and create another if it was lost)"))
	return callbackSecretRE.ReplaceAll(body, []byte("whsec_(withheld: a callback secret is shown once; rotate_callback_secret makes a new one)"))
}

// callbackSecretRE matches a callback signing secret in an answer
// (create_principal's, rotate_callback_secret's).
var callbackSecretRE = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]{16,}`)

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
