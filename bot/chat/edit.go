package chat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// This file is the edit form every surface shows ("Edit & approve"): which
// inputs it has and what they start from, and how the submitted text
// becomes an edit. A surface only renders the inputs and hands the text
// back; the decision is Decide's, with Decision.Arguments or
// Decision.Value, and the tool validates the edit like a new request.

// ArgumentsInput is the name of the one input that holds an action's
// arguments as a JSON object, when they are not edited one per input.
const ArgumentsInput = "arguments"

// valueInput is the name of a memory change's value input.
const valueInput = "value"

// EditInput is one text input of an edit form.
type EditInput struct {
	// Name is the top-level argument the input edits, ArgumentsInput for
	// the whole arguments object as JSON, or valueInput.
	Name string
	// Label is what the input is called on the form (the argument's name,
	// "Arguments (JSON)" or "Value"); untrusted: the surface escapes it.
	Label string
	// Value is the input's starting text.
	Value string
	// Multiline asks for a paragraph input (JSON, long text).
	Multiline bool
	// kind is the JSON type of the argument ('s'tring, 'n'umber, 'b'ool,
	// 'z' null), so the submitted text is read back as the same type.
	kind byte
}

// EditLayout is an item's edit form: its inputs, in order, and the basis
// (the version the form starts from, EditBasis), which a surface carries
// through the form and hands back with the submission, so that an edit
// made on a form opened before someone else's edit is refused rather than
// applied to arguments the person never saw.
type EditLayout struct {
	Inputs []EditInput
	Basis  string
}

// EditForm lays out the edit form of item it for a surface whose forms
// hold at most maxInputs inputs of at most maxLen characters each.
//
// A memory change has one input, its value. An action request's arguments
// are edited one input per top-level argument, keeping each argument's
// JSON type, when every argument is a string, number, boolean or null and
// there are at most maxInputs of them: a person changes "5mg" to "2.5mg"
// without touching JSON syntax, and a validation error lands on the input
// it names. Nested arguments (objects, arrays), or more arguments than the
// surface's form holds, are edited as one JSON object input. ok is false,
// with the reason, when the item cannot be edited on such a form (not
// editable, or its text longer than maxLen).
func EditForm(it bot.Item, maxInputs, maxLen int) (EditLayout, string) {
	e := it.Editable
	if e == nil {
		return EditLayout{}, fmt.Sprintf("#%d cannot be edited: only a pending action request's arguments or a memory proposal's value can.", it.ID)
	}
	lay := EditLayout{Basis: EditBasis(it)}
	tooLong := func(what string) string {
		return fmt.Sprintf("%s of #%d is longer than this form holds (%d characters); edit it in the web console or over the API.", what, it.ID, maxLen)
	}
	switch e.Kind {
	case bot.EditValue:
		v := editableValue(it)
		if utf8.RuneCountInString(v) > maxLen {
			return EditLayout{}, tooLong("The value")
		}
		lay.Inputs = []EditInput{{Name: valueInput, Label: "Value", Value: v, Multiline: utf8.RuneCountInString(v) > 60 || strings.Contains(v, "\n"), kind: 's'}}
		return lay, ""
	case bot.EditArguments:
	default:
		return EditLayout{}, fmt.Sprintf("#%d cannot be edited here (%s); use the API.", it.ID, bot.OneLine(e.Kind, 40))
	}
	keys, vals, err := objectFields(e.Current)
	if err != nil {
		return EditLayout{}, fmt.Sprintf("The arguments of #%d are not a JSON object, so they cannot be edited here.", it.ID)
	}
	flat := len(keys) > 0 && len(keys) <= maxInputs
	var inputs []EditInput
	for i, k := range keys {
		if !flat {
			break
		}
		in := EditInput{Name: k, Label: k}
		v := bytes.TrimSpace(vals[i])
		switch {
		case len(v) > 0 && v[0] == '"':
			var s string
			_ = json.Unmarshal(v, &s)
			in.Value, in.kind = s, 's'
			in.Multiline = utf8.RuneCountInString(s) > 60 || strings.Contains(s, "\n")
		case string(v) == "true" || string(v) == "false":
			in.Value, in.kind = string(v), 'b'
		case string(v) == "null":
			in.kind = 'z'
		case len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')):
			in.Value, in.kind = string(v), 'n'
		default:
			flat = false // an object or an array
			continue
		}
		if utf8.RuneCountInString(in.Value) > maxLen {
			return EditLayout{}, tooLong(fmt.Sprintf("Argument %q", bot.OneLine(k, 40)))
		}
		inputs = append(inputs, in)
	}
	if flat {
		lay.Inputs = inputs
		return lay, ""
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, e.Current, "", "  "); err != nil {
		return EditLayout{}, fmt.Sprintf("The arguments of #%d are not valid JSON, so they cannot be edited here.", it.ID)
	}
	if utf8.RuneCount(pretty.Bytes()) > maxLen {
		return EditLayout{}, tooLong("The arguments")
	}
	lay.Inputs = []EditInput{{Name: ArgumentsInput, Label: "Arguments (JSON object)", Value: pretty.String(), Multiline: true}}
	return lay, ""
}

// editableValue is a memory change's value now up for approval.
func editableValue(it bot.Item) string {
	var v string
	if it.Editable != nil {
		_ = json.Unmarshal(it.Editable.Current, &v)
	}
	return v
}

// EditBasis names what a card of item it showed that an approval rests
// on, in full: what its edit form starts from (an action request's Version,
// the SHA-256 of the arguments up for approval, or the SHA-256 of a memory
// proposal's value) and, when the card shows facts (bot.Item.Facts), their
// versions too. A click or a form carries it, and Decide refuses one whose
// item has changed since: another approver's edit, or a context fact
// superseded, retracted or flagged; the deciding transaction checks the
// arguments' version and the facts again. "" when the item has neither.
func EditBasis(it bot.Item) string {
	if it.Editable == nil && len(it.Facts) == 0 {
		return ""
	}
	if it.Kind == bot.KindAction && it.Version != "" && len(it.Facts) == 0 {
		return it.Version
	}
	h := sha256.New()
	if it.Editable != nil {
		h.Write([]byte(it.Editable.Kind))
		h.Write([]byte{0})
		h.Write(it.Editable.Current)
	}
	if len(it.Facts) > 0 {
		h.Write([]byte{0, 'f'})
		h.Write([]byte(it.Version))
		h.Write([]byte{0})
		h.Write([]byte(bot.FactsDigestOf(it.Facts)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Apply turns a submitted form into the decision's edit (Arguments or
// Value), reading each input back as the JSON type its argument had.
// It answers the input at fault and what to fix when the text cannot be
// read ("dose must be a number"); the tool validates the rest when the
// decision is made.
func (l EditLayout) Apply(d *Decision, values map[string]string) (field, msg string) {
	if len(l.Inputs) == 1 && l.Inputs[0].Name == valueInput {
		v := strings.TrimSpace(values[valueInput])
		if v == "" {
			return valueInput, "Give the value to approve; it cannot be empty."
		}
		d.Value = &v
		return "", ""
	}
	if len(l.Inputs) == 1 && l.Inputs[0].Name == ArgumentsInput {
		raw := strings.TrimSpace(values[ArgumentsInput])
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
			return ArgumentsInput, "The arguments must be one JSON object, such as {\"dose\": \"2.5mg\"}: " + jsonProblem(err)
		}
		d.Arguments = json.RawMessage(raw)
		return "", ""
	}
	obj := make(map[string]json.RawMessage, len(l.Inputs))
	for _, in := range l.Inputs {
		text, ok := values[in.Name]
		if !ok {
			return in.Name, "This field is missing from the form; open the form again."
		}
		switch in.kind {
		case 's':
			b, _ := json.Marshal(text)
			obj[in.Name] = b
		case 'n':
			t := strings.TrimSpace(text)
			var n json.Number
			if err := json.Unmarshal([]byte(t), &n); err != nil || t == "" {
				return in.Name, fmt.Sprintf("%s must be a number, such as 2.5.", bot.OneLine(in.Name, 40))
			}
			obj[in.Name] = json.RawMessage(t)
		case 'b':
			t := strings.ToLower(strings.TrimSpace(text))
			if t != "true" && t != "false" {
				return in.Name, fmt.Sprintf("%s must be true or false.", bot.OneLine(in.Name, 40))
			}
			obj[in.Name] = json.RawMessage(t)
		case 'z':
			t := strings.TrimSpace(text)
			switch {
			case t == "" || t == "null":
				obj[in.Name] = json.RawMessage("null")
			case json.Valid([]byte(t)):
				obj[in.Name] = json.RawMessage(t)
			default:
				b, _ := json.Marshal(t)
				obj[in.Name] = b
			}
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return l.Inputs[0].Name, "The arguments could not be put together; open the form again."
	}
	d.Arguments = b
	return "", ""
}

func jsonProblem(err error) string {
	if err == nil {
		return "that is not an object."
	}
	return bot.OneLine(err.Error(), 200) + "."
}

// objectFields returns a JSON object's keys and values, in order.
func objectFields(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("not an object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	return keys, vals, nil
}

// sameJSON reports whether two JSON texts hold the same value (object key
// order and spacing aside; numbers compared by their text).
func sameJSON(a, b []byte) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// PrepareEdit runs Decide's checks before an edit form is shown (dedupe,
// identity, the item pending and in the person's scope) and those only an
// edit needs: the item can be edited, and the person may decide it (the
// form shows the item's full arguments or value, a sensitive item's too:
// that view is audited as view_sensitive, as Details does), and, on an
// item that requires step-up, a fresh sign-in (without one the reply is
// the private step-up link an Approve click gets). Ready carries the item.
func PrepareEdit(ctx context.Context, b *bot.Bot, d Decision) Outcome {
	out, caller := begin(ctx, b, d)
	if out.Status != Ready {
		return out
	}
	it := out.Item
	if it.Editable == nil {
		return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("#%d cannot be edited: only a pending action request's arguments or a memory proposal's value can. Approve or reject it as it is.", it.ID)}
	}
	if why, readOnly := b.Items().ReadOnly(caller, it); readOnly {
		refuse(ctx, b, d, caller, it.Space, fmt.Sprintf("edit #%d refused: %s", it.ID, why))
		return Outcome{Status: Refused, Item: it, Caller: caller, Reply: fmt.Sprintf("Access denied: you cannot approve #%d (%s), so you cannot edit it either.", it.ID, why)}
	}
	if it.StepUp > 0 && !caller.SteppedUp(it.StepUp, b.Now()) {
		// Approving it edited needs the fresh sign-in approving it does:
		// answer as an Approve click is answered (the one-time step-up
		// link) rather than open a form its submission would be refused.
		refuse(ctx, b, d, caller, it.Space, fmt.Sprintf("edit #%d refused: %s", it.ID, policy.StepUpRequired))
		return Outcome{Status: Refused, Item: it, Caller: caller, Reply: stepUpReply(b, caller, it)}
	}
	if it.Sensitive {
		if err := b.Chat().Audit(ctx, caller, it.Space, "view_sensitive", fmt.Sprintf("%s: edit form of #%d shown privately", d.Surface, it.ID)); err != nil {
			b.Logger().Error("chat: auditing an edit form failed; form withheld", "item", it.ID, "err", err)
			return Outcome{Status: Failed, Caller: caller, Reply: couldNotComplete}
		}
	}
	return Outcome{Status: Ready, Item: it, Caller: caller}
}
