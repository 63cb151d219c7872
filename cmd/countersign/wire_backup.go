package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"

	"github.com/countersign/countersign/adapters/webhook"
)

// wireBackup mounts GET /v1/admin/backup (webhook.BackupHandler): bbolt
// holds its file locked while serve runs, so an online copy must come from
// the server. On PostgreSQL it answers 409: pg_dump takes that backup.
func (a *app) wireBackup(context.Context) error {
	snap, _ := a.db.(webhook.Snapshotter)
	h := webhook.BackupHandler(webhook.BackupOptions{Bot: a.bot, Logger: a.log, Snapshot: snap, Engine: a.cfg.Store.Engine,
		PublicKey: hex.EncodeToString(a.key.Public().(ed25519.PublicKey))})
	a.mounts["GET "+webhook.BackupPath] = webhook.Authenticate(a.bot, a.log, "http")(h)
	return nil
}
