// Command floor is the cheapest Go JSON endpoint the benchmark compares the
// gate with: it reads the body, decodes it, checks the bearer header and
// encodes a small answer, with net/http and encoding/json and nothing else
// (no store, no audit, no log line). benchrun starts it beside the
// countersign server and measures both in the same run.
//
//	FLOOR_KEY=secret floor   # listens on 127.0.0.1:0, prints "msg=listening addr=HOST:PORT" on stderr
package main

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

type args struct {
	Subject          string `json:"subject"`
	MaxStalenessDays int    `json:"max_staleness_days"`
}

type answer struct {
	Verdict string `json:"verdict"`
	Subject string `json:"subject"`
	Text    string `json:"text"`
}

func main() {
	want := []byte("Bearer " + os.Getenv("FLOOR_KEY"))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, `{"error":"unauthenticated"}`, http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"error":"bad body"}`, http.StatusBadRequest)
			return
		}
		var a args
		if err := json.Unmarshal(body, &a); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer{Verdict: "SAFE", Subject: a.Subject, Text: "SAFE to act on '" + a.Subject + "'."})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "msg=listening addr=%s\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
