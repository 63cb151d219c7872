package client_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/receipt"
)

// The examples run against a stand-in for a deployment (below): a loopback
// server whose requests alice approves, as a person would in chat.

func ExampleClient_ConfirmAction() {
	srv, pub := startDeployment(func(d *deployment, id string) { d.decide(id, "approved", `{"drain":true,"service":"web"}`) })
	defer srv.Close()

	cs, err := client.New(srv.URL, "cs_sk_agent_example", pub)
	if err != nil {
		fmt.Println(err) // a bad URL, key or public key: nothing was asked
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	action := client.Action{
		Tool:      "restart_service",
		Arguments: json.RawMessage(`{"service": "web", "drain": false}`),
		Summary:   "restart web to pick up the new config",
		UserID:    "ops", RunID: "deploy-42",
	}
	ok, err := cs.ConfirmAction(ctx, action)
	var (
		denied  *client.Denied
		expired *client.Expired
		clarify *client.NeedsClarification
		pending *client.Pending
	)
	switch {
	case errors.As(err, &denied):
		fmt.Println("denied:", denied.Reason) // change the plan
		return
	case errors.As(err, &expired):
		fmt.Println("nobody answered:", expired.Reason)
		return
	case errors.As(err, &clarify):
		fmt.Println("ask the user for", clarify.Missing)
		return
	case errors.As(err, &pending):
		fmt.Println("still pending; resume later with", pending.RequestID)
		return
	case err != nil:
		fmt.Println(err) // includes client.ErrReceipt: never run on a bad receipt
		return
	}
	if err := cs.Redeem(ctx, ok.Receipt); err != nil {
		fmt.Println(err) // a 409 means it already ran: do not run it twice
		return
	}
	fmt.Println(ok.Outcome, "by", ok.ConfirmedBy, "("+ok.Changes+")")
	fmt.Println("run", ok.Tool, string(ok.Arguments)) // exactly the approved arguments
	// Output:
	// approved_with_changes by alice [prin_a] (drain false → true)
	// run restart_service {"drain":true,"service":"web"}
}

func ExampleClient_Resume() {
	srv, pub := startDeployment(nil) // nobody decides until alice does, below
	defer srv.Close()
	cs, err := client.New(srv.URL, "cs_sk_agent_example", pub)
	if err != nil {
		fmt.Println(err)
		return
	}
	action := client.Action{Tool: "restart_service", Arguments: json.RawMessage(`{"service": "web"}`)}

	// The agent waits a little, then does something else.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err = cs.ConfirmAction(ctx, action)
	var pending *client.Pending
	if !errors.As(err, &pending) {
		fmt.Println("unexpected:", err)
		return
	}
	fmt.Println("still pending:", pending.RequestID)

	// Later alice approves; the agent picks the request up again by its id.
	dep.decide(pending.RequestID, "approved", `{"service":"web"}`)
	ok, err := cs.Resume(context.Background(), pending.RequestID, action)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ok.Outcome, ok.RequestID, "by", ok.ConfirmedBy)
	// Output:
	// still pending: req_1
	// approved req_1 by alice [prin_a]
}

// deployment is the examples' stand-in for a Countersign deployment: it
// keeps requests in memory and signs receipts as the real server does.
type deployment struct {
	key   ed25519.PrivateKey
	onAsk func(d *deployment, id string)
	mu    sync.Mutex
	n     int
	byID  map[string]map[string]any
	asked map[string]json.RawMessage
}

// dep is the deployment the last startDeployment started.
var dep *deployment

func startDeployment(onAsk func(d *deployment, id string)) (*httptest.Server, ed25519.PublicKey) {
	key := ed25519.NewKeyFromSeed([]byte("example-deployment-key-012345678"))
	dep = &deployment{key: key, onAsk: onAsk, byID: map[string]map[string]any{}, asked: map[string]json.RawMessage{}}
	return httptest.NewServer(dep), key.Public().(ed25519.PublicKey)
}

// decide records alice's decision of id; approved is the arguments she
// approved (an edit when they differ from the request's).
func (d *deployment) decide(id, status, approved string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.byID[id]
	r["status"], r["confirmed_by"] = status, "alice [prin_a]"
	if status != "approved" {
		return
	}
	h, _ := receipt.ArgsHash(r["tool"].(string), []byte(approved))
	now := time.Now()
	rec, _ := receipt.Sign(receipt.Payload{Key: receipt.KeyID(d.key.Public().(ed25519.PublicKey)), RequestID: id,
		Tool: r["tool"].(string), ApprovedArgsSHA256: h, ConfirmedBy: "alice [prin_a]",
		IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()},
		func(m []byte) []byte { return ed25519.Sign(d.key, m) })
	r["receipt"], r["approved_arguments"] = rec, json.RawMessage(approved)
	asked, _ := receipt.ArgsHash(r["tool"].(string), d.asked[id])
	if asked != h {
		r["changes"] = "drain false → true"
	}
}

func (d *deployment) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var args struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		RequestID string          `json:"request_id"`
	}
	json.NewDecoder(r.Body).Decode(&args)
	d.mu.Lock()
	var data map[string]any
	var ask string
	switch r.URL.Path {
	case "/v1/tools/confirm_action":
		d.n++
		ask = fmt.Sprintf("req_%d", d.n)
		data = map[string]any{"request_id": ask, "status": "pending", "tool": args.Tool}
		d.byID[ask], d.asked[ask] = data, args.Arguments
	case "/v1/tools/action_status":
		data = d.byID[args.RequestID]
	case "/v1/tools/redeem_receipt":
		data = map[string]any{}
	}
	answer, _ := json.Marshal(map[string]any{"data": data})
	d.mu.Unlock()
	if ask != "" && d.onAsk != nil {
		d.onAsk(d, ask)
		d.mu.Lock()
		answer, _ = json.Marshal(map[string]any{"data": d.byID[ask]})
		d.mu.Unlock()
	}
	w.Write(answer)
}
