// Package testbot builds a *bot.Bot for tests on a real bbolt file. It is
// apart from package bottest because bot's own tests use bottest, and a
// helper that imports bot cannot be imported by them.
package testbot

import (
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/kv/kvtest"
)

// New returns a bot for a test: o as given, with a bbolt store in a
// temporary directory (bottest.OpenStore, every write run twice through
// kvtest.Twice) when o.Store is nil and the fixed
// bottest.SigningKey when o.SigningKey is nil. It replaces the copies of
// "open bolt in a temp dir, make a key, bot.New".
func New(t testing.TB, o bot.Options) *bot.Bot {
	t.Helper()
	if o.Store == nil {
		// Every write function runs twice (kvtest.Twice), as an engine
		// may run it: a handler with a side effect outside its
		// transaction shows up as a doubled outcome in the test.
		o.Store = kvtest.Twice(bottest.OpenStore(t))
	}
	if o.SigningKey == nil {
		o.SigningKey = bottest.SigningKey()
	}
	b, err := bot.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
