package memorytools

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/countersign/countersign/bot"
)

// The gates' answers (check_before_act, safe_recall) write their own JSON
// (bot.JSONAppender), field by field in the order and with the omissions
// of their struct tags: the bytes encoding/json writes for them, without
// its reflection on every call. answerjson_test.go holds them to that.

// AppendJSON implements bot.JSONAppender.
func (d verdictData) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"verdict":`...)
	dst = bot.AppendJSONString(dst, string(d.Verdict))
	dst = append(dst, `,"reasons":`...)
	dst = bot.AppendJSONStrings(dst, d.Reasons)
	dst = append(dst, `,"subject":`...)
	dst = bot.AppendJSONString(dst, d.Subject)
	dst = append(dst, `,"facts":`...)
	if d.Facts == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range d.Facts {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = d.Facts[i].appendFields(append(dst, '{')); err != nil {
				return nil, err
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), nil
}

// AppendJSON implements bot.JSONAppender.
func (d safeRecallData) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"verdict":`...)
	dst = bot.AppendJSONString(dst, string(d.Verdict))
	dst = append(dst, `,"reasons":`...)
	dst = bot.AppendJSONStrings(dst, d.Reasons)
	dst = append(dst, `,"facts":`...)
	if d.Facts == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range d.Facts {
			if i > 0 {
				dst = append(dst, ',')
			}
			x := &d.Facts[i]
			var err error
			if dst, err = x.appendFields(append(dst, '{')); err != nil {
				return nil, err
			}
			dst = append(dst, `,"score":`...)
			dst = strconv.AppendInt(dst, int64(x.Score), 10)
			dst = append(dst, `,"critical":`...)
			dst = strconv.AppendBool(dst, x.Critical)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(d.FlaggedSubjects) > 0 {
		dst = append(dst, `,"flagged_subjects":`...)
		dst = bot.AppendJSONStrings(dst, d.FlaggedSubjects)
	}
	dst = append(dst, `,"active_facts":`...)
	dst = strconv.AppendInt(dst, int64(d.ActiveFacts), 10)
	dst = append(dst, `,"whole_space":`...)
	dst = strconv.AppendBool(dst, d.Whole)
	return append(dst, '}'), nil
}

// appendFields appends the fields of a fact's answer, without the braces.
func (d *factData) appendFields(dst []byte) ([]byte, error) {
	p := &d.Provenance
	var err error
	dst = append(dst, `"id":`...)
	dst = strconv.AppendUint(dst, p.ID, 10)
	dst = append(dst, `,"subject":`...)
	dst = bot.AppendJSONString(dst, p.Subject)
	dst = append(dst, `,"value":`...)
	dst = bot.AppendJSONString(dst, p.Value)
	dst = append(dst, `,"scope":`...)
	dst = bot.AppendJSONString(dst, p.Scope)
	dst = append(dst, `,"kind":`...)
	dst = bot.AppendJSONString(dst, string(p.Kind))
	dst = append(dst, `,"status":`...)
	dst = bot.AppendJSONString(dst, string(p.Status))
	dst = append(dst, `,"confidence":`...)
	if dst, err = bot.AppendJSONFloat(dst, p.Confidence); err != nil {
		return nil, err
	}
	if p.Supersedes != 0 {
		dst = append(dst, `,"supersedes":`...)
		dst = strconv.AppendUint(dst, p.Supersedes, 10)
	}
	if p.Source != "" {
		dst = append(dst, `,"source":`...)
		dst = bot.AppendJSONString(dst, p.Source)
	}
	if p.Category != "" {
		dst = append(dst, `,"category":`...)
		dst = bot.AppendJSONString(dst, p.Category)
	}
	if p.Said != "" {
		dst = append(dst, `,"said":`...)
		dst = bot.AppendJSONString(dst, p.Said)
	}
	dst = append(dst, `,"set_at":`...)
	if dst, err = bot.AppendJSONTime(dst, p.SetAt); err != nil {
		return nil, err
	}
	if !p.RetiredAt.IsZero() {
		dst = append(dst, `,"retired_at":`...)
		if dst, err = bot.AppendJSONTime(dst, p.RetiredAt); err != nil {
			return nil, err
		}
	}
	if p.Pending != "" {
		dst = append(dst, `,"pending":`...)
		dst = bot.AppendJSONString(dst, string(p.Pending))
	}
	if len(d.Metadata) > 0 {
		// Free-form JSON the caller gave: encoding/json, as before.
		dst = append(dst, `,"metadata":`...)
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(d.Metadata); err != nil {
			return nil, err
		}
		dst = append(dst, bytes.TrimSuffix(b.Bytes(), []byte{'\n'})...)
	}
	if q := d.Proposal; q != nil {
		dst = append(dst, `,"proposal":{"change":`...)
		dst = bot.AppendJSONString(dst, q.Change)
		dst = append(dst, `,"status":`...)
		dst = bot.AppendJSONString(dst, q.Status)
		if q.Held != "" {
			dst = append(dst, `,"held":`...)
			dst = bot.AppendJSONString(dst, q.Held)
		}
		if q.Target != 0 {
			dst = append(dst, `,"target":`...)
			dst = strconv.AppendUint(dst, q.Target, 10)
		}
		dst = append(dst, `,"proposed_by":`...)
		dst = bot.AppendJSONString(dst, q.ProposedBy)
		dst = append(dst, `,"proposed_at":`...)
		dst = bot.AppendJSONString(dst, q.ProposedAt)
		for _, f := range [...]struct{ name, v string }{{`,"decided_by":`, q.DecidedBy}, {`,"assurance":`, q.Assurance}, {`,"note":`, q.Note}, {`,"reason":`, q.Reason}} {
			if f.v != "" {
				dst = append(dst, f.name...)
				dst = bot.AppendJSONString(dst, f.v)
			}
		}
		if q.ItemID != 0 {
			dst = append(dst, `,"item_id":`...)
			dst = strconv.AppendUint(dst, q.ItemID, 10)
		}
		dst = append(dst, '}')
	}
	if d.Archived {
		dst = append(dst, `,"archived":true`...)
	}
	if d.Tombstone {
		dst = append(dst, `,"tombstone":true`...)
	}
	return dst, nil
}
