package main

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/adapters/email/smtptest"
)

// emailConfig escalates by email to the members, through srv.
func emailConfig(srv *smtptest.Server, include string) string {
	return fmt.Sprintf(`
tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
    approvers: {roles: [member, admin]}
approvals:
  remind_after: 1s
  escalate_after: 2s
  escalation_channel: email
  escalation_role: member
sweep:
  schedule: "@every 1s"
email:
  from: Countersign <countersign@hospital.example>
  include: %s
  link_ttl: 2h
  smtp: {host: %s, port: %d, starttls: false}
principals:
  - name: dr_smith
    role: member
    email: dr.smith@hospital.example
  - name: ward_viewer
    role: viewer
    email: viewer@hospital.example
`, include, srv.Host, srv.Port)
}

// mailParts is a received message: its header and its text and HTML parts.
type mailParts struct {
	Header     mail.Header
	Text, HTML string
}

func readMail(t *testing.T, raw []byte) mailParts {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the message is not RFC 5322: %v\n%s", err, raw)
	}
	out := mailParts{Header: m.Header}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q, want multipart/alternative (%v)", m.Header.Get("Content-Type"), err)
	}
	r := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading a part: %v", err)
		}
		body, _ := io.ReadAll(p) // quoted-printable is decoded by NextPart
		switch ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); ct {
		case "text/plain":
			out.Text = string(body)
		case "text/html":
			out.HTML = string(body)
		}
	}
	if out.Text == "" || out.HTML == "" {
		t.Fatalf("want a text and an HTML part, got text %q html %q", out.Text, out.HTML)
	}
	return out
}

var linkRE = regexp.MustCompile(`https?://\S+/ui/signin/link\?t=\S+`)

// TestEmailEscalationEndToEnd: an escalation reaches the approver by
// email through a real SMTP server (and not the viewer, who may not
// decide); under include: none the message names no patient, tool or
// argument; its link opens the item after sign-in, once; the request is
// still decided only in the console or chat.
func TestEmailEscalationEndToEnd(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Options{})
	e := newTestEnv(t, emailConfig(srv, "none"))
	agent := e.CreateKey("ops_agent", "agent")
	e.Start()
	req := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "user_id": "patient_42",
		"arguments": map[string]any{"service": "payments-ward-7"}, "summary": "warfarin pump for patient_42"})
	reqID, _ := req.Data["request_id"].(string)

	msgs := srv.Wait(1)
	m := msgs[0]
	if len(m.To) != 1 || m.To[0] != "dr.smith@hospital.example" || m.From != "countersign@hospital.example" {
		t.Fatalf("envelope from %q to %v, want countersign@… to dr_smith only", m.From, m.To)
	}
	p := readMail(t, m.Data)
	for h, want := range map[string]string{"To": `"dr_smith" <dr.smith@hospital.example>`, "Auto-Submitted": "auto-generated", "Precedence": "bulk"} {
		if got := p.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	if p.Header.Get("Message-Id") == "" || p.Header.Get("Date") == "" {
		t.Errorf("no Message-ID or Date: %v, want both", p.Header)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(p.Header.Get("Subject"))
	if !strings.Contains(subject, "Escalated") || !strings.Contains(subject, "awaits a decision") {
		t.Errorf("subject %q, want an escalation", subject)
	}
	all := subject + "\n" + p.Text + "\n" + p.HTML
	for _, secret := range []string{"patient_42", "payments-ward-7", "restart_service", "warfarin", "ops_agent"} {
		if strings.Contains(all, secret) {
			t.Errorf("include: none, yet the message says %q, want it left out:\n%s", secret, all)
		}
	}
	if !strings.Contains(p.Text, "replies to it are not read") {
		t.Errorf("the text does not say replies decide nothing (want %q in it):\n%s", "replies to it are not read", p.Text)
	}
	link := linkRE.FindString(p.Text)
	if link == "" || !strings.Contains(p.HTML, `href="`+strings.ReplaceAll(link, "&", "&amp;")+`"`) {
		t.Fatalf("no sign-in link in both parts, want it in the text and as the HTML's href:\ntext %s\nhtml %s", p.Text, p.HTML)
	}

	// The link: the console's one-time sign-in, landing on the item.
	u, _ := url.Parse(link)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(e.URL + u.RequestURI())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "dr_smith") {
		t.Fatalf("the link's page answered %d, want 200 naming dr_smith:\n%s", resp.StatusCode, page)
	}
	tok := u.Query().Get("t")
	resp, err = browser.PostForm(e.URL+"/ui/signin/link", url.Values{"t": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	itemPath := regexp.MustCompile(`url=(/ui/items/\d+)`).FindStringSubmatch(string(page))
	if resp.StatusCode != 200 || itemPath == nil {
		t.Fatalf("signing in answered %d, want a page that goes on to the item:\n%s", resp.StatusCode, page)
	}
	resp, err = browser.Get(e.URL + itemPath[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "restart_service") || !strings.Contains(string(page), "payments-ward-7") {
		t.Fatalf("the item page after sign-in answered %d, want 200 showing %q and %q:\n%s", resp.StatusCode, "restart_service", "payments-ward-7", page)
	}
	// Once only.
	resp, err = http.PostForm(e.URL+"/ui/signin/link", url.Values{"t": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(page), "already used") {
		t.Errorf("the link used again answered %d, want 403 already used", resp.StatusCode)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Errorf("the request is %v after the email and the sign-in, want pending", st.Data["status"])
	}
	if n := len(srv.Messages()); n != 1 {
		t.Errorf("%d messages, want one escalation to one approver", n)
	}
}
