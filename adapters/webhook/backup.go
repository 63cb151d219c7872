package webhook

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/countersign/countersign/bot"
)

// BackupPath is the route of online backups (`countersign store backup`;
// the client's own copy is client.BackupPath, held equal by a test).
const BackupPath = "/v1/admin/backup"

// BackupKeyHeader carries the audit chain's public key (hex) with a backup,
// so that `store backup` can verify the copy it received.
const BackupKeyHeader = "Countersign-Audit-Public-Key"

// Snapshotter is a store that writes a consistent copy of itself while it
// serves (adapters/bolt's Backup).
type Snapshotter interface {
	Backup(ctx context.Context, w io.Writer, size func(int64) error) (int64, error)
}

// BackupOptions configure BackupHandler.
type BackupOptions struct {
	Bot    *bot.Bot
	Logger *slog.Logger
	// Snapshot takes the copy; nil (a PostgreSQL store) answers 409:
	// pg_dump takes that backup.
	Snapshot Snapshotter
	// Engine names the store's engine in that answer.
	Engine string
	// PublicKey is the audit chain's public key, hex (BackupKeyHeader).
	PublicKey string
}

// BackupHandler answers GET BackupPath behind Authenticate: with an admin
// key that is not limited to some user_ids, a consistent copy of the
// store taken while the server runs (the store file a restore puts in
// place), audited before the copy is taken, so that the copy holds the
// record of who took it. A client that stops reading is cut off rather
// than left to stall the store's writes.
func BackupHandler(o BackupOptions) http.Handler { return backupHandler{o} }

// backupHandler answers GET /v1/admin/backup.
type backupHandler struct{ o BackupOptions }

func (h backupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := h.o
	if r.Method != http.MethodGet {
		// GET routes also match HEAD: a HEAD would be audited and copied
		// for nothing.
		w.Header().Set("Allow", http.MethodGet)
		WriteError(w, r, o.Logger, bot.Invalid("", "a backup is taken with GET %s", BackupPath))
		return
	}
	caller := CallerFrom(r.Context())
	if !caller.MayAdminister() || len(caller.Scopes) > 0 {
		// A backup holds every space, every principal and the whole chain.
		WriteError(w, r, o.Logger, bot.Errorf(bot.KindDenied, "Access denied: a backup holds the whole store, so only an admin key that is not limited to some user_ids may take one (%s has role %s)", caller, caller.Role))
		return
	}
	if o.Snapshot == nil {
		WriteError(w, r, o.Logger, bot.Errorf(bot.KindConflict, "store.engine is %s: back it up with pg_dump while the replicas run, and keep the audit signing key beside the dump (docs/operations.md, \"Backups\")", o.Engine))
		return
	}
	// Recorded before the copy is taken, so that the copy holds the record
	// of who took it.
	if err := o.Bot.Chat().Audit(r.Context(), caller, bot.Space{}, "store_backup", "an online backup of the store, over HTTP"); err != nil {
		WriteError(w, r, o.Logger, err)
		return
	}
	start := time.Now()
	started := false
	// The copy holds a read transaction until it is sent, and a write
	// that must grow the file waits for it: a client that stops reading is
	// cut off rather than left to stall the store.
	out := stallWriter{rc: http.NewResponseController(w), w: w}
	n, err := o.Snapshot.Backup(r.Context(), out, func(size int64) error {
		hd := w.Header()
		hd.Set("Content-Type", "application/octet-stream")
		hd.Set("Content-Length", strconv.FormatInt(size, 10))
		hd.Set("Content-Disposition", `attachment; filename="countersign-backup.db"`)
		hd.Set("Cache-Control", "no-store")
		hd.Set(BackupKeyHeader, o.PublicKey)
		w.WriteHeader(http.StatusOK)
		started = true
		return nil
	})
	switch {
	case err != nil && !started:
		WriteError(w, r, o.Logger, err)
	case err != nil:
		// The status is sent: the client sees the body end before its
		// Content-Length, and `store backup` keeps nothing.
		o.Logger.Warn("store backup: the copy was cut off", "principal", caller.String(), "bytes", n, "err", err)
	default:
		o.Logger.Info("store backup", "principal", caller.String(), "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	}
}

// backupStall is how long a backup's client may leave a write unread.
const backupStall = 30 * time.Second

// stallWriter gives every write to the client backupStall to complete.
type stallWriter struct {
	rc *http.ResponseController
	w  io.Writer
}

func (s stallWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(backupStall)) // unsupported: no deadline, as before
	return s.w.Write(p)
}
