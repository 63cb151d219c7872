package chat

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file is the chat scope gate (seed 004): a pure function over the text
// a person typed to Countersign in chat. It never does I/O and never reads a
// clock, so the same message always gets the same verdict, and no text in a
// message can change what it computes: the gate matches words, it does not
// follow instructions.
//
// The gate is a denylist that short-circuits out; everything else is in.
// Two things it deliberately never does:
//   - it never turns free text into a decision: "yes", "approve it" or "lgtm"
//     typed in a channel is ScopeNotADecision; only the exact command
//     "approve <id>" (or a button, which does not come through here) decides;
//   - it never refuses a greeting, a capability question or an informational
//     question: those are in lane.
//
// The gate shapes replies; it is not what protects an action. Countersign
// carries out no action itself, and a decision is taken only through the
// command grammar below, from a mapped principal holding approve.

// maxChatText is the longest chat message, in bytes, the gate classifies.
// Longer text is ScopeTooLong.
const maxChatText = 4000

// laneStatement is what Countersign does, stated positively. It opens the
// help and every refusal.
const laneStatement = "I record and route approvals: I show pending memory changes and agent action requests, take decisions from the people allowed to make them, and keep a signed audit trail."

// ScopeKind is the scope gate's classification of one chat message.
type ScopeKind string

// The verdicts. Every verdict but ScopeOutOfLane is in lane.
const (
	// ScopeCommand is a well-formed command; ScopeVerdict.Command holds it.
	ScopeCommand ScopeKind = "command"
	// ScopeGreeting is a greeting or a thank-you.
	ScopeGreeting ScopeKind = "greeting"
	// ScopeCapability asks what Countersign does or how to use it.
	ScopeCapability ScopeKind = "capability"
	// ScopeQuestion is an informational question. Families lists the
	// out-of-lane families it mentions, so the answer can name who does them.
	ScopeQuestion ScopeKind = "question"
	// ScopeUsage is a command word with arguments that do not fit it;
	// Command.Name (and Command.ID when one parsed) say which.
	ScopeUsage ScopeKind = "usage"
	// ScopeNotADecision is free text that reads like consent or refusal
	// ("yes", "approve it", "lgtm"): it decides nothing. When the text names
	// one item ("please approve #7"), Command carries the command it
	// probably meant, to show, never to run.
	ScopeNotADecision ScopeKind = "not_a_decision"
	// ScopeUnknown is in-lane text the gate does not recognise; it is
	// answered with the help, never refused.
	ScopeUnknown ScopeKind = "unknown"
	// ScopeTooLong is a message over maxChatText bytes.
	ScopeTooLong ScopeKind = "too_long"
	// ScopeOutOfLane is a request outside Countersign's lane: refused.
	// Families lists every family the message names, in table order.
	ScopeOutOfLane ScopeKind = "out_of_lane"
)

// scopeKinds returns every verdict the gate can return.
func scopeKinds() []ScopeKind {
	return []ScopeKind{ScopeCommand, ScopeGreeting, ScopeCapability, ScopeQuestion, ScopeUsage,
		ScopeNotADecision, ScopeUnknown, ScopeTooLong, ScopeOutOfLane}
}

// batchIDs are the items of a batch approval (Batch), nil for any other
// command.
func (c ChatCommand) batchIDs() []uint64 {
	var out []uint64
	for _, w := range strings.Fields(c.Batch) {
		if n, err := strconv.ParseUint(w, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// MaxBatch is the most items one approve command decides ("approve 12 13
// 14").
const MaxBatch = 20

// The chat command names.
const (
	CmdPending = "pending"
	CmdShow    = "show"
	CmdApprove = "approve"
	CmdReject  = "reject"
	CmdHistory = "history"
	CmdCheck   = "check"
	CmdHelp    = "help"
	CmdWeb     = "web" // a private one-time sign-in link to the web console
	// CmdGrants lists the standing grants in force; CmdRevokeGrant
	// revokes one ("revoke-grant 4").
	CmdGrants      = "grants"
	CmdRevokeGrant = "revoke-grant"
)

// ChatCommand is a parsed chat command. Its arguments are data: they are
// never scanned by the denylist (a rejection reason may well say "it would
// delete the prod database").
type ChatCommand struct {
	Name string // one of the Cmd constants
	ID   uint64 // show, approve, reject; pending: the item to continue after ("pending after 12")
	// Version is the SHA-256 (64 hex digits, lower case) typed after an
	// approve's id: the version of an edited action request the person
	// approves ("approve 12 <version>"); "" when none was typed.
	Version string
	// Confirm is approve's confirmation of an item that cannot be undone:
	// the target typed after the word confirm ("approve 12 confirm
	// orders_prod").
	Confirm string
	Reason  string // reject: the rest of the line after the id, as typed
	// Batch lists the items of a batch approval ("approve 12 13 14"), as
	// "12 13 14": two to MaxBatch ids, each decided on its own
	// (batchIDs). A string, so that a command stays comparable.
	Batch   string
	Subject string // history, check
	Space   string // history, check: the memory space's user_id; "" means default
	// Delegate is the person a delegate command names, as typed ("@bob",
	// "<@U0123ABC>"), and Until its window as typed ("until 18:00", "for
	// 4h"), or "off" (delegate.go).
	Delegate, Until string
}

// ScopeVerdict is the gate's answer for one message.
type ScopeVerdict struct {
	Kind     ScopeKind
	Command  ChatCommand // ScopeCommand; Name (and ID) for ScopeUsage; a hint for ScopeNotADecision
	Families []Family    // ScopeOutOfLane, and the mentions of a ScopeQuestion
	// Negated is set on a ScopeOutOfLane whose every out-of-lane clause is
	// a negated request ("don't delete the prod database"): the reply
	// hands on without implying Countersign would have acted.
	Negated bool
}

// Family is one kind of out-of-lane request the gate recognises. Each has its
// own hand-off in the refusal.
type Family string

// The families, in the order a refusal lists them.
const (
	FamilyApproval    Family = "approval"    // approve everything; switch the gate off
	FamilyInjection   Family = "injection"   // instructions carried in message text
	FamilyDestructive Family = "destructive" // delete or wipe data
	FamilyOperations  Family = "operations"  // restart, stop, scale, deploy
	FamilyClinical    Family = "clinical"    // start, stop or change a medication
	FamilyMessaging   Family = "messaging"   // send an email or a message
	FamilyPayments    Family = "payments"    // pay, transfer, refund
	FamilyDocuments   Family = "documents"   // classify, file, process a document
	FamilyCode        Family = "code"        // change, merge, push code
	FamilyMemory      Family = "memory"      // record or change a fact
	FamilyAccess      Family = "access"      // roles, keys, permissions
	FamilyGeneral     Family = "general"     // poems, jokes, general assistance
)

// allFamilies returns every family in table order.
func allFamilies() []Family {
	out := make([]Family, len(gateFamilies))
	for i, f := range gateFamilies {
		out[i] = f.family
	}
	return out
}

// handoffOf is the sentence of a refusal that names who does the thing
// instead; "" for an unknown family.
func handoffOf(f Family) string {
	for _, s := range gateFamilies {
		if s.family == f {
			return s.handoff
		}
	}
	return ""
}

// gateRefusal is the reply to an out-of-lane message naming families: it states
// the lane, says the refusal is by design, and hands each family on.
// Unknown families are skipped; with none left it hands on to the help.
func gateRefusal(fams []Family) string {
	var b strings.Builder
	b.WriteString("That's outside what Countersign does. ")
	b.WriteString(laneStatement)
	b.WriteString("\n\nI never carry out actions myself — that's by design.")
	writeHandoffs(&b, fams, "Type `help` to see what I can do.")
	return b.String()
}

// negatedRefusal is the reply to a negated out-of-lane request ("don't
// delete the prod database"): the same lane and hand-off as Refusal, with
// nothing that implies Countersign would have acted.
func negatedRefusal(fams []Family) string {
	var b strings.Builder
	b.WriteString("I never carry out actions myself — that's by design, so there is nothing for me to hold back. ")
	b.WriteString(laneStatement)
	if h := handoffs(fams); h != "" {
		b.WriteString("\n\n" + h)
	}
	return b.String()
}

// handoffs renders the hand-off sentences of fams: one sentence, or
// "Instead:" and one bulleted line each; "" when no family is known.
func handoffs(fams []Family) string {
	var b strings.Builder
	writeHandoffs(&b, fams, "")
	return strings.TrimSpace(b.String())
}

func writeHandoffs(b *strings.Builder, fams []Family, fallback string) {
	var lines []string
	for _, s := range gateFamilies {
		for _, f := range fams {
			if f == s.family {
				lines = append(lines, s.handoff)
				break
			}
		}
	}
	switch len(lines) {
	case 0:
		if fallback != "" {
			b.WriteString(" " + fallback)
		}
	case 1:
		b.WriteString(" " + lines[0])
	default:
		b.WriteString(" Instead:")
		for _, l := range lines {
			b.WriteString("\n• " + l)
		}
	}
}

// Scope classifies a chat message typed to Countersign, with or without a
// leading "/countersign". It is total (any input, including invalid UTF-8,
// gets a verdict) and deterministic.
//
// The order of the rules is the contract:
//  1. too long: ScopeTooLong; empty: the help command;
//  2. a well-formed command: ScopeCommand (its arguments are data);
//  3. the denylist over every clause: ScopeOutOfLane with every family
//     named (a union, never a first match). Verb and noun match by
//     proximity, with up to four words between them. Clauses that are
//     informational questions are not refused, but what they mention is kept;
//     instructions carried in text (injection) are refused in any clause;
//  4. "approve" or "reject" with arguments that do not fit: ScopeUsage when
//     an id parsed ("reject 3"), else ScopeNotADecision ("approve it");
//  5. a capability question: ScopeCapability;
//  6. free-text consent ("yes", "ok go ahead", "lgtm"): ScopeNotADecision;
//  7. a greeting, another command word with wrong arguments, an
//     informational question, and finally ScopeUnknown: all in lane.
func Scope(text string) ScopeVerdict {
	if len(text) > maxChatText {
		return ScopeVerdict{Kind: ScopeTooLong}
	}
	body := stripChatAddress(strings.ToValidUTF8(strings.TrimSpace(text), "\uFFFD"))
	if body == "" {
		return ScopeVerdict{Kind: ScopeCommand, Command: ChatCommand{Name: CmdHelp}}
	}
	cmd, ok, near := parseChatCommand(body)
	if ok {
		return ScopeVerdict{Kind: ScopeCommand, Command: cmd}
	}

	lower := strings.ToLower(body)
	clauses := splitChatClauses(lower)
	out, mentions, anyQuestion, negated := scanChatClauses(lower, clauses)
	if len(out) > 0 {
		return ScopeVerdict{Kind: ScopeOutOfLane, Families: familiesInOrder(out, mentions), Negated: negated}
	}

	var all []string
	for _, c := range clauses {
		all = append(all, c.words...)
	}
	if near.Name == CmdApprove || near.Name == CmdReject {
		if near.ID != 0 {
			return ScopeVerdict{Kind: ScopeUsage, Command: near}
		}
		return ScopeVerdict{Kind: ScopeNotADecision, Command: decisionHint(all)}
	}
	for _, c := range clauses {
		if wordsHaveAnyPrefix(stripChatFillers(c.words), chatCapabilityPhrases) {
			return ScopeVerdict{Kind: ScopeCapability}
		}
	}
	if isFreeTextDecision(body, all, anyQuestion) {
		return ScopeVerdict{Kind: ScopeNotADecision, Command: decisionHint(all)}
	}
	if len(all) > 0 && allWordsIn(all, chatGreetingWords) {
		return ScopeVerdict{Kind: ScopeGreeting}
	}
	if near.Name != "" {
		return ScopeVerdict{Kind: ScopeUsage, Command: near}
	}
	if anyQuestion {
		return ScopeVerdict{Kind: ScopeQuestion, Families: familiesInOrder(mentions, nil)}
	}
	return ScopeVerdict{Kind: ScopeUnknown}
}

// stripChatAddress removes a leading platform mention ("<@U0123>") and a
// leading "/countersign", "@countersign" or "countersign" (followed by a
// space, ':' or ',') from body.
func stripChatAddress(body string) string {
	if strings.HasPrefix(body, "<@") {
		if i := strings.IndexByte(body, '>'); i > 0 && i <= 64 {
			body = strings.TrimSpace(body[i+1:])
		}
	}
	for _, p := range []string{"/countersign", "@countersign", "countersign"} {
		if len(body) < len(p) || !strings.EqualFold(body[:len(p)], p) {
			continue
		}
		rest := body[len(p):]
		if rest != "" {
			r, _ := utf8.DecodeRuneInString(rest)
			if !unicode.IsSpace(r) && r != ':' && r != ',' {
				continue
			}
		}
		return strings.TrimSpace(strings.TrimLeft(rest, " \t:,"))
	}
	return body
}

// parseChatCommand parses body as a command. ok reports a well-formed command;
// otherwise near carries the command word (and a valid id) when the first
// word is one.
func parseChatCommand(body string) (cmd ChatCommand, ok bool, near ChatCommand) {
	fs := chatFields(body)
	if len(fs) == 0 {
		return ChatCommand{}, false, ChatCommand{}
	}
	args := fs[1:]
	// "approve: 7" and "pending?" are commands; "approve? 7" is not.
	trim := ":"
	if len(args) == 0 {
		trim = "?!.:"
	}
	name := strings.ToLower(strings.TrimRight(fs[0].text, trim))
	switch name {
	case CmdPending:
		if len(args) == 0 {
			return ChatCommand{Name: name}, true, ChatCommand{}
		}
		// "pending after 12": the next page, after item #12.
		if len(args) == 2 && strings.EqualFold(args[0].text, "after") {
			if id, ok := parseChatID(args[1].text); ok {
				return ChatCommand{Name: name, ID: id}, true, ChatCommand{}
			}
		}
		return ChatCommand{}, false, ChatCommand{Name: name}
	case CmdHelp, CmdWeb, CmdGrants:
		if len(args) == 0 {
			return ChatCommand{Name: name}, true, ChatCommand{}
		}
		return ChatCommand{}, false, ChatCommand{Name: name}
	case CmdShow, CmdApprove, CmdRevokeGrant:
		var id uint64
		if len(args) > 0 {
			id, _ = parseChatID(args[0].text)
		}
		if len(args) == 1 && id != 0 {
			return ChatCommand{Name: name, ID: id}, true, ChatCommand{}
		}
		// "approve 12 <version>": the version of an edited request.
		if name == CmdApprove && len(args) == 2 && id != 0 && isVersion(args[1].text) {
			return ChatCommand{Name: name, ID: id, Version: strings.ToLower(args[1].text)}, true, ChatCommand{}
		}
		if name == CmdApprove && id != 0 && len(args) >= 2 && len(args) <= MaxBatch {
			// "approve 12 13 14": a batch, every word an item id.
			ids := []uint64{id}
			for _, a := range args[1:] {
				n, ok := parseChatID(a.text)
				if !ok || slices.Contains(ids, n) {
					ids = nil
					break
				}
				ids = append(ids, n)
			}
			if ids != nil {
				words := make([]string, len(ids))
				for i, n := range ids {
					words[i] = strconv.FormatUint(n, 10)
				}
				return ChatCommand{Name: name, ID: id, Batch: strings.Join(words, " ")}, true, ChatCommand{}
			}
		}
		if name == CmdApprove && id != 0 && len(args) == 3 && strings.EqualFold(args[1].text, confirmWord) && validChatArg(args[2].text) {
			// The confirmation of an item that cannot be undone: the
			// word confirm and the target, nothing else.
			return ChatCommand{Name: name, ID: id, Confirm: args[2].text}, true, ChatCommand{}
		}
		return ChatCommand{}, false, ChatCommand{Name: name, ID: id}
	case CmdReject:
		var id uint64
		if len(args) > 0 {
			id, _ = parseChatID(args[0].text)
		}
		if len(args) >= 2 && id != 0 {
			reason := strings.TrimSpace(body[args[1].start:])
			return ChatCommand{Name: name, ID: id, Reason: reason}, true, ChatCommand{}
		}
		return ChatCommand{}, false, ChatCommand{Name: name, ID: id}
	case CmdDelegate:
		if c, ok := parseDelegate(args); ok {
			return c, true, ChatCommand{}
		}
		return ChatCommand{}, false, ChatCommand{Name: name}
	case CmdHistory, CmdCheck:
		if len(args) == 1 || len(args) == 2 {
			subject := args[0].text
			space := ""
			if len(args) == 2 {
				space = args[1].text
			}
			if validChatArg(subject) && (space == "" || validChatArg(space)) {
				return ChatCommand{Name: name, Subject: subject, Space: space}, true, ChatCommand{}
			}
		}
		return ChatCommand{}, false, ChatCommand{Name: name}
	}
	return ChatCommand{}, false, ChatCommand{}
}

// isVersion reports whether s is a version as `show` prints it: the 64
// hex digits of a SHA-256.
func isVersion(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // lower case
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// confirmWord introduces approve's confirmation: "approve 12 confirm
// orders_prod".
const confirmWord = "confirm"

// parseChatID parses an item id as typed in chat: "12" or "#12", optionally
// followed by '.' or '!'. Ids are positive.
func parseChatID(s string) (uint64, bool) {
	s = strings.TrimRight(s, ".!")
	s = strings.TrimPrefix(s, "#")
	if s == "" || len(s) > 20 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, false
	}
	return n, true
}

// validChatArg accepts a subject or space token: at most 128 bytes, no control
// or format characters, and not an English function word ("check the
// invoice" is not a check of the subject "the").
func validChatArg(s string) bool {
	if s == "" || len(s) > 128 || chatArgStopwords[strings.ToLower(s)] {
		return false
	}
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

type chatField struct {
	text  string
	start int
}

// chatFields splits s around Unicode white space, keeping where each
// field starts.
func chatFields(s string) []chatField {
	var out []chatField
	start := -1
	for i, r := range s {
		if unicode.IsSpace(r) {
			if start >= 0 {
				out = append(out, chatField{text: s[start:i], start: start})
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, chatField{text: s[start:], start: start})
	}
	return out
}

// chatClause is one sentence of a message, as lower-case words.
type chatClause struct {
	words    []string
	question bool // ended with '?'
}

// splitChatClauses splits lower-cased text into clauses at '?', '!', ';', line
// breaks and a '.' followed by a space, and each clause into words: runs of
// letters and digits, split where letters meet digits ("5mg" is "5" "mg").
// Apostrophes inside a word vanish ("don't" is "dont"); format characters
// (zero-width spaces and joiners) are dropped, so they cannot split a word.
func splitChatClauses(s string) []chatClause {
	var (
		out  []chatClause
		cur  chatClause
		word []rune
	)
	endWord := func() {
		if len(word) > 0 {
			cur.words = append(cur.words, string(word))
			word = word[:0]
		}
	}
	endClause := func(question bool) {
		endWord()
		cur.question = cur.question || question
		if len(cur.words) > 0 {
			cur.words = mergeChatBigrams(cur.words)
			out = append(out, cur)
		}
		cur = chatClause{}
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.Is(unicode.Cf, r) || r == '\'' || r == '’' || r == 'ʼ':
			// dropped: "don't" is "dont", and a zero-width space cannot split a word
		case unicode.IsLetter(r) || unicode.IsMark(r):
			if len(word) > 0 && unicode.IsDigit(word[len(word)-1]) {
				endWord()
			}
			word = append(word, r)
		case unicode.IsDigit(r):
			if len(word) > 0 && !unicode.IsDigit(word[len(word)-1]) {
				endWord()
			}
			word = append(word, r)
		case r == '?':
			endClause(true)
		case r == '!' || r == ';' || r == '\n' || r == '\r' || r == '…' || r == '\u2028' || r == '\u2029':
			endClause(false)
		case r == '.':
			if i+1 == len(rs) || unicode.IsSpace(rs[i+1]) {
				endClause(false)
			} else {
				endWord()
			}
		default:
			endWord()
		}
	}
	endClause(false)
	return out
}

// mergeChatBigrams joins the two-word forms the tables know as one word.
func mergeChatBigrams(w []string) []string {
	out := w[:0:0]
	for i := 0; i < len(w); i++ {
		if i+1 < len(w) {
			if m, ok := chatBigrams[[2]string{w[i], w[i+1]}]; ok {
				out = append(out, m)
				i++
				continue
			}
		}
		out = append(out, w[i])
	}
	return out
}

type chatClauseKind int

const (
	chatImperative chatClauseKind = iota // a request or a statement: scanned
	chatQuestion                         // an informational question or an in-lane lookup
)

// chatClauseKindOf decides whether a clause is informational. A polite wrapper
// ("can you …", "could someone …") is a request, not a question. It returns
// the clause's words after fillers and any polite wrapper.
func chatClauseKindOf(c chatClause) (chatClauseKind, []string) {
	w := stripChatFillers(c.words)
	if len(w) == 0 {
		return chatImperative, w
	}
	for _, p := range chatPolitePrefixes {
		if wordsHavePrefix(w, p) {
			w = stripChatFillers(w[len(p):])
			if isChatLookup(w) {
				return chatQuestion, w
			}
			return chatImperative, w
		}
	}
	if chatWhWords[w[0]] {
		return chatQuestion, w
	}
	if chatAuxWords[w[0]] {
		if len(w) > 1 && (w[1] == "not" || w[1] == "nt") {
			return chatImperative, w[2:]
		}
		return chatQuestion, w
	}
	if isChatLookup(w) {
		return chatQuestion, w
	}
	return chatImperative, w
}

// isChatLookup reports an in-lane lookup: "check if …", "show me what's
// pending".
func isChatLookup(w []string) bool {
	if len(w) == 0 || !chatLookupVerbs[w[0]] {
		return false
	}
	for j := 1; j < len(w) && j <= 3; j++ {
		if chatLookupObjects[w[j]] {
			return true
		}
	}
	return false
}

// scanChatClauses runs the denylist over every clause. out holds the families
// named by requests (and injections anywhere); mentions those named only in
// informational questions.
//
// negated reports that every clause that put a family in out is a negated
// request ("don't …", "do not …", "never …"), and no marker did.
func scanChatClauses(lower string, clauses []chatClause) (out, mentions map[Family]bool, anyQuestion, negated bool) {
	out, mentions = map[Family]bool{}, map[Family]bool{}
	negated = true
	lines := strings.Split(lower, "\n")
	for _, s := range gateFamilies {
		for _, m := range s.markers {
			if strings.Contains(lower, m) {
				out[s.family] = true
				negated = false
			}
		}
		for _, line := range lines {
			line = strings.TrimSpace(line)
			for _, m := range s.lineMarkers {
				if strings.HasPrefix(line, m) {
					out[s.family] = true
					negated = false
				}
			}
		}
	}
	for _, c := range clauses {
		kind, head := chatClauseKindOf(c)
		if kind == chatQuestion {
			anyQuestion = true
		}
		for _, s := range gateFamilies {
			if !s.matches(c.words, head, kind == chatImperative) {
				continue
			}
			if kind == chatImperative || s.always {
				out[s.family] = true
				if s.always || !s.negated(c.words) {
					negated = false
				}
			} else {
				mentions[s.family] = true
			}
		}
	}
	return out, mentions, anyQuestion, negated && len(out) > 0
}

// negated reports a request that says not to do this family's thing:
// after fillers and "please", the clause opens with "don't", "dont", "do
// not" or "never" followed at once by one of the family's verbs ("don't
// delete the prod database"). "don't wait, delete it" is not negated.
func (s *gateFamily) negated(words []string) bool {
	w := stripChatFillers(words)
	for len(w) > 0 && w[0] == "please" {
		w = w[1:]
	}
	switch {
	case len(w) > 1 && (w[0] == "dont" || w[0] == "never"):
		w = w[1:]
	case len(w) > 2 && w[0] == "do" && w[1] == "not":
		w = w[2:]
	default:
		return false
	}
	if s.leading[w[0]] {
		return true
	}
	for _, r := range s.rules {
		if r.verbs[w[0]] {
			return true
		}
	}
	return false
}

// A verb and the noun it acts on match by proximity in seed 004's sense:
// anywhere in the same clause (sentence), in that order, however many words
// lie between ("wipe all of the old customer records", "purge every single
// one of the old backups"), since a clause is one request. gateMaxRevGap is
// the most words between a noun and a later verb in a passive or resumptive
// form ("the prod database should be deleted"), which is kept short because
// a noun followed much later by a participle is usually not its object.
const gateMaxRevGap = 3

// gateRule is one verb list and one noun list that must occur near each other.
type gateRule struct {
	verbs, nouns map[string]bool
}

// gateFamily is one row of the denylist.
type gateFamily struct {
	family      Family
	rules       []gateRule
	leading     map[string]bool // verbs that match alone at the head of a request ("deploy")
	phrases     [][]string      // word sequences that match anywhere in a clause
	markers     []string        // substrings of the lower-cased message (chat-template role markers)
	lineMarkers []string        // prefixes of a line of the lower-cased message ("system: …")
	always      bool            // refused in questions too: an instruction is never informational
	handoff     string
}

func (s *gateFamily) matches(words, head []string, imperative bool) bool {
	if imperative && len(head) > 0 && s.leading[head[0]] {
		return true
	}
	for _, p := range s.phrases {
		if wordsContain(words, p) {
			return true
		}
	}
	for _, r := range s.rules {
		if r.near(words) {
			return true
		}
	}
	return false
}

// near reports a verb followed by a noun anywhere later in the clause w,
// or a noun followed within gateMaxRevGap words by the verb in a passive or
// resumptive form ("… deleted", "… file it").
func (r gateRule) near(w []string) bool {
	for i, x := range w {
		if r.verbs[x] {
			for j := i + 1; j < len(w); j++ {
				if r.nouns[w[j]] {
					return true
				}
			}
		}
		if r.nouns[x] {
			for j := i + 1; j < len(w) && j <= i+1+gateMaxRevGap; j++ {
				if r.verbs[w[j]] && (isChatParticiple(w[j]) || (j+1 < len(w) && chatObjectPronouns[w[j+1]])) {
					return true
				}
			}
		}
	}
	return false
}

func isChatParticiple(w string) bool {
	return strings.HasSuffix(w, "ed") || chatIrregularParticiples[w]
}

// isFreeTextDecision reports text that reads like a decision but is not one:
// only consent/refusal words and numbers ("ok go ahead", "yes", "lgtm",
// "cancel 12"), a message that opens with one ("yes, do it"), a short
// statement holding a decision verb ("I think #12 is wrong, reject it"), or a
// lone reaction emoji.
func isFreeTextDecision(body string, all []string, anyQuestion bool) bool {
	if len(all) == 0 {
		compact := strings.Join(strings.Fields(body), "")
		for _, e := range chatDecisionEmoji {
			if strings.Contains(compact, e) {
				return true
			}
		}
		return false
	}
	if compact := strings.Join(strings.Fields(body), ""); compact == "+1" || compact == "-1" {
		return true
	}
	if len(all) <= 10 && anyWordIn(all, chatDecisionCore) && allDecisionVocab(all) {
		return true
	}
	if w := stripChatAddressWords(all); len(w) > 0 && chatDecisionOpeners[w[0]] {
		return true
	}
	return !anyQuestion && len(all) <= 10 && anyWordIn(all, chatDecisionStrong)
}

// allDecisionVocab reports whether every word is decision vocabulary or a
// number ("ok 3", "cancel 12").
func allDecisionVocab(w []string) bool {
	for _, x := range w {
		if _, ok := parseChatID(x); !ok && !chatDecisionVocab[x] {
			return false
		}
	}
	return true
}

// decisionHint names the command a free-text decision probably meant
// ("please approve #7" → approve 7), so the reply can show it. It is only
// ever shown, never run. The id must directly follow the decision word
// ("approve the change for patient 42" names no item); the zero ChatCommand
// when the text names no single item, or both approving and rejecting.
func decisionHint(all []string) ChatCommand {
	var hint ChatCommand
	for i, w := range all {
		name := ""
		switch {
		case chatApproveWords[w]:
			name = CmdApprove
		case chatRejectWords[w]:
			name = CmdReject
		default:
			continue
		}
		if hint.Name != "" && hint.Name != name {
			return ChatCommand{}
		}
		hint.Name = name
		if i+1 < len(all) {
			if id, ok := parseChatID(all[i+1]); ok {
				if hint.ID != 0 && hint.ID != id {
					return ChatCommand{}
				}
				hint.ID = id
			}
		}
	}
	if hint.ID == 0 {
		return ChatCommand{}
	}
	return hint
}

func stripChatAddressWords(w []string) []string {
	for len(w) > 0 && chatAddressWords[w[0]] {
		w = w[1:]
	}
	return w
}

func stripChatFillers(w []string) []string {
	for len(w) > 0 && chatFillers[w[0]] {
		w = w[1:]
	}
	return w
}

func wordsHavePrefix(w, p []string) bool {
	if len(p) > len(w) {
		return false
	}
	for i := range p {
		if w[i] != p[i] {
			return false
		}
	}
	return true
}

func wordsHaveAnyPrefix(w []string, ps [][]string) bool {
	for _, p := range ps {
		if wordsHavePrefix(w, p) {
			return true
		}
	}
	return false
}

func wordsContain(w, p []string) bool {
	for i := 0; i+len(p) <= len(w); i++ {
		if wordsHavePrefix(w[i:], p) {
			return true
		}
	}
	return false
}

func allWordsIn(w []string, set map[string]bool) bool {
	for _, x := range w {
		if !set[x] {
			return false
		}
	}
	return true
}

func anyWordIn(w []string, set map[string]bool) bool {
	for _, x := range w {
		if set[x] {
			return true
		}
	}
	return false
}

// familiesInOrder returns the families in a or b, in table order.
func familiesInOrder(a, b map[Family]bool) []Family {
	var out []Family
	for _, s := range gateFamilies {
		if a[s.family] || b[s.family] {
			out = append(out, s.family)
		}
	}
	return out
}

func wordSet(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

func wordSeqs(phrases ...string) [][]string {
	out := make([][]string, len(phrases))
	for i, p := range phrases {
		out[i] = strings.Fields(p)
	}
	return out
}
