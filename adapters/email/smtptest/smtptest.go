// Package smtptest runs a real SMTP server (github.com/emersion/go-smtp)
// on 127.0.0.1 for tests: it takes every message it is sent, optionally
// only over STARTTLS (a certificate made for the test) and only after
// PLAIN authentication, and records what arrived.
package smtptest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one message the server accepted.
type Message struct {
	From string
	To   []string
	Data []byte
	TLS  bool   // sent over STARTTLS
	User string // who authenticated, "" for nobody
}

// Options configure Start.
type Options struct {
	TLS      bool   // offer STARTTLS and refuse mail without it
	Username string // require PLAIN authentication as Username/Password
	Password string
}

// Server is a running SMTP server.
type Server struct {
	Host string
	Port int
	// ClientTLS trusts the server's certificate (with TLS).
	ClientTLS *tls.Config

	t       testing.TB
	mu      sync.Mutex
	msgs    []Message
	changed chan struct{}
}

// Start runs a server until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{t: t, Host: "127.0.0.1", changed: make(chan struct{})}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, o: o, c: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.MaxMessageBytes = 1 << 20
	srv.AllowInsecureAuth = !o.TLS
	if o.TLS {
		cert, pool := selfSigned(t)
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.ClientTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Messages returns what arrived so far, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Wait waits until at least n messages arrived, failing the test after a
// generous deadline. It waits for an event; it never measures speed.
func (s *Server) Wait(n int) []Message {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		got, ch := len(s.msgs), s.changed
		s.mu.Unlock()
		if got >= n {
			return s.Messages()
		}
		select {
		case <-ch:
		case <-deadline:
			s.t.Fatalf("timed out waiting for %d messages; %d arrived", n, got)
		}
	}
}

type session struct {
	s    *Server
	o    Options
	c    *smtp.Conn
	user string
	from string
	to   []string
}

func (x *session) AuthMechanisms() []string {
	if x.o.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (x *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != x.o.Username || pass != x.o.Password {
			return errors.New("invalid credentials")
		}
		x.user = user
		return nil
	}), nil
}

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.o.TLS {
		if _, ok := x.c.TLSConnectionState(); !ok {
			return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Must issue a STARTTLS command first"}
		}
	}
	if x.o.Username != "" && x.user == "" {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, tlsOn := x.c.TLSConnectionState()
	x.s.mu.Lock()
	x.s.msgs = append(x.s.msgs, Message{From: x.from, To: x.to, Data: b, TLS: tlsOn, User: x.user})
	close(x.s.changed)
	x.s.changed = make(chan struct{})
	x.s.mu.Unlock()
	return nil
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smtptest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}
