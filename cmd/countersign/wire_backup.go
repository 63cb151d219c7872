package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/policy"
)

// snapshotter is a store that writes a consistent copy of itself while it
// serves (adapters/bolt's Backup).
type snapshotter interface {
	Backup(ctx context.Context, w io.Writer, size func(int64) error) (int64, error)
}

// wireBackup mounts GET /v1/admin/backup: with an admin key that is not
// limited to some user_ids, it answers a consistent copy of the bbolt store
// taken while the server runs (the store file a restore puts in place).
// bbolt holds its file locked while serve runs, so the copy must come from
// the server. On PostgreSQL it answers 409: pg_dump takes that backup.
func (a *app) wireBackup(context.Context) error {
	snap, _ := a.db.(snapshotter)
	var h http.Handler = backupHandler{app: a, snap: snap, pub: hex.EncodeToString(a.key.Public().(ed25519.PublicKey))}
	a.mounts["GET "+client.BackupPath] = webhook.Authenticate(a.bot, a.log, "http")(h)
	return nil
}

// backupHandler answers GET /v1/admin/backup.
type backupHandler struct {
	app  *app
	snap snapshotter // nil on PostgreSQL
	pub  string
}

func (h backupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := h.app
	if r.Method != http.MethodGet {
		// GET routes also match HEAD: a HEAD would be audited and copied
		// for nothing.
		w.Header().Set("Allow", http.MethodGet)
		webhook.WriteError(w, r, a.log, bot.Invalid("", "a backup is taken with GET %s", client.BackupPath))
		return
	}
	caller := webhook.CallerFrom(r.Context())
	if !policy.Grants(caller.Role, policy.CapAdmin) || len(caller.Scopes) > 0 {
		// A backup holds every space, every principal and the whole chain.
		webhook.WriteError(w, r, a.log, bot.Errorf(bot.KindDenied, "Access denied: a backup holds the whole store, so only an admin key that is not limited to some user_ids may take one (%s has role %s)", caller, caller.Role))
		return
	}
	if h.snap == nil {
		webhook.WriteError(w, r, a.log, bot.Errorf(bot.KindConflict, "store.engine is %s: back it up with pg_dump while the replicas run, and keep the audit signing key beside the dump (docs/operations.md, \"Backups\")", a.cfg.Store.Engine))
		return
	}
	// Recorded before the copy is taken, so that the copy holds the record
	// of who took it.
	if err := a.bot.Chat().Audit(r.Context(), caller, bot.Space{}, "store_backup", "an online backup of the store, over HTTP"); err != nil {
		webhook.WriteError(w, r, a.log, err)
		return
	}
	start := time.Now()
	started := false
	// The copy holds a read transaction until it is sent, and a write
	// that must grow the file waits for it: a client that stops reading is
	// cut off rather than left to stall the store.
	out := stallWriter{rc: http.NewResponseController(w), w: w}
	n, err := h.snap.Backup(r.Context(), out, func(size int64) error {
		hd := w.Header()
		hd.Set("Content-Type", "application/octet-stream")
		hd.Set("Content-Length", strconv.FormatInt(size, 10))
		hd.Set("Content-Disposition", `attachment; filename="countersign-backup.db"`)
		hd.Set("Cache-Control", "no-store")
		hd.Set(client.BackupKeyHeader, h.pub)
		w.WriteHeader(http.StatusOK)
		started = true
		return nil
	})
	switch {
	case err != nil && !started:
		webhook.WriteError(w, r, a.log, err)
	case err != nil:
		// The status is sent: the client sees the body end before its
		// Content-Length, and `store backup` keeps nothing.
		a.log.Warn("store backup: the copy was cut off", "principal", caller.String(), "bytes", n, "err", err)
	default:
		a.log.Info("store backup", "principal", caller.String(), "bytes", n, "took", time.Since(start).Round(time.Millisecond))
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
