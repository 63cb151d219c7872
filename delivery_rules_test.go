package countersign

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestAdaptersLeaveDeliveryToTheOutbox enforces the delivery contract
// (bot.Renderer; ARCHITECTURE.md, "Adding a surface") over the non-test
// code of every adapter: the outbox decides what an event means, records
// the cards, and decides retry, backoff and give-up; an adapter renders
// and classifies, and never decides any of it on its own.
func TestAdaptersLeaveDeliveryToTheOutbox(t *testing.T) {
	n := 0
	err := filepath.WalkDir("adapters", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); path != "adapters" && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files here
		}
		fset := token.NewFileSet()
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(path, name), nil, 0)
			if err != nil {
				return err
			}
			files = append(files, f)
		}
		n++
		for _, b := range deliveryBreaches(fset, files) {
			t.Error(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("checked only %d adapter packages, want at least 5: is the test running at the module root?", n)
	}
}

// TestDeliveryRuleCatchesAnAdapterDecidingDelivery plays the rule against
// adapters that decide delivery themselves, as one written before the
// contract did (Slack's gave up on an unrenderable item after 5 tries) or
// as a new surface's author might, and against one that keeps to it.
func TestDeliveryRuleCatchesAnAdapterDecidingDelivery(t *testing.T) {
	const header = `package teams
import (
	"context"
	"errors"
	"time"

	"github.com/countersign/countersign/bot"
	slackgo "github.com/slack-go/slack"
)
`
	cases := []struct {
		name string
		src  string
		want []string // a part of each breach reported, in order
	}{
		{"the pre-contract Slack adapter", `
type Adapter struct{ bot *bot.Bot }
const maxViewAttempts = 5
func (a *Adapter) Run(ctx context.Context) error { return a.bot.Outbox().Run(ctx, "teams", time.Second, a.Deliver) }
func (a *Adapter) Deliver(ctx context.Context, ev bot.Event) error {
	_, err := a.bot.Items().Get(ctx, ev.ItemID)
	if err != nil && ev.Attempts+1 >= maxViewAttempts {
		return &bot.PermanentError{Err: err}
	}
	return a.bot.Items().AddMessageRef(ctx, ev.ItemID, bot.MessageRef{})
}
`, []string{"Outbox().Run", "bot.Event", ".Attempts", "AddMessageRef"}},
		{"a renderer that retries with a sleep, in a helper", `
type renderer struct{}
func (renderer) Channel(string) string { return "" }
func (r renderer) Post(ctx context.Context, ch string, it bot.Item, key string) (bot.MessageRef, error) {
	return r.try(ctx, func() error { return nil })
}
func (renderer) Update(context.Context, bot.MessageRef, bot.Item) error { return nil }
func (renderer) Reply(context.Context, bot.MessageRef, bot.Item, bot.Note) error { return nil }
func (r renderer) try(ctx context.Context, f func() error) (bot.MessageRef, error) {
	for n := 1; n <= 3; n++ {
		if err := f(); err == nil {
			return bot.MessageRef{}, nil
		}
		time.Sleep(bot.Backoff(n))
	}
	return bot.MessageRef{}, errors.New("gave up")
}
`, []string{"time.Sleep", "bot.Backoff"}},
		{"a renderer that waits for a Retry-After in the background", `
type renderer struct{ retry chan bot.Note }
func (renderer) Channel(string) string { return "" }
func (renderer) Post(context.Context, string, bot.Item, string) (bot.MessageRef, error) { return bot.MessageRef{}, nil }
func (renderer) Update(context.Context, bot.MessageRef, bot.Item) error { return nil }
func (r renderer) Reply(ctx context.Context, card bot.MessageRef, it bot.Item, n bot.Note) error {
	go func() {
		select {
		case <-time.After(time.Minute):
			r.retry <- n
		case <-ctx.Done():
		}
	}()
	return nil
}
`, []string{"go statement", "time.After"}},
		{"a client library's own retries", `
var opts = []slackgo.Option{slackgo.OptionRetry(3)}
`, []string{"OptionRetry"}},
		{"a renderer that keeps to the contract", `
type renderer struct{ last time.Time }
func (renderer) Channel(name string) string { return name }
func (r renderer) Post(ctx context.Context, ch string, it bot.Item, key string) (bot.MessageRef, error) {
	r.last = time.Now()
	return bot.MessageRef{}, &bot.RetryAfterError{After: 2 * time.Second, Err: errors.New("429")}
}
func (renderer) Update(context.Context, bot.MessageRef, bot.Item) error {
	return &bot.UnavailableError{Err: errors.New("503")}
}
func (renderer) Reply(context.Context, bot.MessageRef, bot.Item, bot.Note) error { return nil }
// A reconnect loop is not delivery.
func reconnect(ctx context.Context) {
	for n := 1; ctx.Err() == nil; n++ {
		<-time.After(bot.Backoff(n))
	}
}
`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "adapters/teams/deliver.go", header+c.src, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := deliveryBreaches(fset, []*ast.File{f})
			if len(got) != len(c.want) {
				t.Fatalf("%d breaches, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("breach %d = %q, want it to name %q", i, got[i], w)
				}
			}
		})
	}
}

// deliveryFix ends every breach: what the adapter does instead.
const deliveryFix = "an adapter implements bot.Renderer and hands it to Outbox().Serve; it makes each platform call once and classifies the failure (bot.RetryAfterError, bot.UnavailableError, bot.PermanentError), and the outbox decides the rest (ARCHITECTURE.md, \"Adding a surface\")"

// deliveryBreaches checks one package's files (parsed with positions in
// fset) against the delivery contract's rules, and describes each breach.
//
// Anywhere in an adapter: no bot.Event or bot.Deliverer, no read of an
// event's Attempts, Faults or NextAttempt (an outbox event, its attempt
// count and retry state are the outbox's); no call of the
// outbox's worker or bookkeeping (Outbox().Run, Drain, Due, Retry,
// Delivered, DeliverTo) nor of Items().AddMessageRef (the outbox records
// the cards); no client library's own retries switched on (slack-go's
// OptionRetry, discordgo's rate-limit and REST retries).
//
// In a renderer (a type with Post, Update and Reply methods) and every
// function of the package they reach: no waiting (time.Sleep, After,
// AfterFunc, NewTimer, NewTicker, Tick), no bot.Backoff or
// bot.GiveUpAfter, no goroutine.
func deliveryBreaches(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, args...), deliveryFix))
	}
	// The local names of the imports that matter, per file.
	type names struct{ bot, time string }
	imports := map[*ast.File]names{}
	for _, f := range files {
		var n names
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := filepath.Base(path)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			switch path {
			case module + "/bot":
				n.bot = local
			case "time":
				n.time = local
			}
		}
		imports[f] = n
	}
	isPkg := func(x ast.Expr, name string) bool {
		id, ok := x.(*ast.Ident)
		return ok && name != "" && id.Name == name
	}
	// Anywhere.
	outboxOps := []string{"Run", "Drain", "Due", "Retry", "Delivered", "DeliverTo"}
	for _, f := range files {
		n := imports[f]
		ast.Inspect(f, func(node ast.Node) bool {
			switch x := node.(type) {
			case *ast.SelectorExpr:
				if isPkg(x.X, n.bot) && (x.Sel.Name == "Event" || x.Sel.Name == "Deliverer") {
					report(x, "refers to bot.%s (what an event means is the outbox's)", x.Sel.Name)
				}
				if x.Sel.Name == "Attempts" || x.Sel.Name == "Faults" || x.Sel.Name == "NextAttempt" {
					report(x, "reads an event's delivery state (.%s): when to retry or give up is the outbox's", x.Sel.Name)
				}
				if call, ok := x.X.(*ast.CallExpr); ok && slices.Contains(outboxOps, x.Sel.Name) {
					if s, ok := call.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Outbox" {
						report(x, "calls Outbox().%s", x.Sel.Name)
					}
				}
				if x.Sel.Name == "AddMessageRef" {
					report(x, "calls AddMessageRef (the outbox records the cards a renderer posts)")
				}
				if x.Sel.Name == "OptionRetry" || x.Sel.Name == "OptionRetryConfig" {
					report(x, "switches on the client's own retries (%s)", x.Sel.Name)
				}
			case *ast.CallExpr:
				if s, ok := x.Fun.(*ast.SelectorExpr); ok && len(x.Args) == 1 {
					if (s.Sel.Name == "WithRetryOnRatelimit" && !isLit(x.Args[0], "false")) || (s.Sel.Name == "WithRestRetries" && !isLit(x.Args[0], "0")) {
						report(x, "switches on the client's own retries (%s)", s.Sel.Name)
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range x.Lhs {
					s, ok := lhs.(*ast.SelectorExpr)
					if !ok || i >= len(x.Rhs) {
						continue
					}
					if (s.Sel.Name == "ShouldRetryOnRateLimit" && !isLit(x.Rhs[i], "false")) || (s.Sel.Name == "MaxRestRetries" && !isLit(x.Rhs[i], "0")) {
						report(x, "switches on the client's own retries (%s)", s.Sel.Name)
					}
				}
			}
			return true
		})
	}
	// The renderers and what they reach.
	type fn struct {
		decl *ast.FuncDecl
		file *ast.File
	}
	byName := map[string][]fn{}   // plain functions
	methods := map[string][]fn{}  // methods, by name
	sets := map[string][]string{} // receiver type: method names
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if fd.Recv == nil {
				byName[fd.Name.Name] = append(byName[fd.Name.Name], fn{fd, f})
				continue
			}
			methods[fd.Name.Name] = append(methods[fd.Name.Name], fn{fd, f})
			recv := recvName(fd.Recv.List[0].Type)
			sets[recv] = append(sets[recv], fd.Name.Name)
		}
	}
	var queue []fn
	seen := map[*ast.FuncDecl]string{} // the renderer method it is reached from
	for _, ms := range methods {
		for _, m := range ms {
			recv := recvName(m.decl.Recv.List[0].Type)
			if !slices.Contains([]string{"Post", "Update", "Reply"}, m.decl.Name.Name) ||
				!slices.Contains(sets[recv], "Post") || !slices.Contains(sets[recv], "Update") || !slices.Contains(sets[recv], "Reply") {
				continue
			}
			seen[m.decl] = recv + "." + m.decl.Name.Name
			queue = append(queue, m)
		}
	}
	waits := []string{"Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		from := seen[cur.decl]
		n := imports[cur.file]
		reach := func(f fn) {
			if _, ok := seen[f.decl]; !ok {
				seen[f.decl] = from
				queue = append(queue, f)
			}
		}
		var visit func(ast.Node) bool
		visit = func(node ast.Node) bool {
			switch x := node.(type) {
			case *ast.GoStmt:
				report(x, "%s starts a goroutine (a go statement) in delivery", from)
			case *ast.SelectorExpr:
				switch {
				case isPkg(x.X, n.time) && slices.Contains(waits, x.Sel.Name):
					report(x, "%s waits (time.%s) in delivery", from, x.Sel.Name)
				case isPkg(x.X, n.bot) && (x.Sel.Name == "Backoff" || x.Sel.Name == "GiveUpAfter"):
					report(x, "%s uses bot.%s in delivery", from, x.Sel.Name)
				case isImportSel(cur.file, x):
				default:
					for _, m := range methods[x.Sel.Name] {
						reach(m)
					}
				}
				ast.Inspect(x.X, visit) // not x.Sel: a method or field name is no function
				return false
			case *ast.Ident:
				for _, f := range byName[x.Name] {
					reach(f)
				}
			}
			return true
		}
		ast.Inspect(cur.decl.Body, visit)
	}
	return out
}

// recvName is the name of a method's receiver type (T for T, *T, T[P]).
func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// isLit reports whether e is the literal (or predeclared constant) lit.
func isLit(e ast.Expr, lit string) bool {
	switch x := e.(type) {
	case *ast.BasicLit:
		return x.Value == lit
	case *ast.Ident:
		return x.Name == lit
	}
	return false
}

// isImport reports whether name is the local name of one of f's imports.
func isImport(f *ast.File, name string) bool {
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := filepath.Base(path)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == name {
			return true
		}
	}
	return false
}

// isImportSel reports whether x is pkg.Name of one of f's imports (its
// Ident is then not a function of the package).
func isImportSel(f *ast.File, x *ast.SelectorExpr) bool {
	id, ok := x.X.(*ast.Ident)
	return ok && isImport(f, id.Name)
}
