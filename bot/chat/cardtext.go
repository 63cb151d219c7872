package chat

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// CardText is the text a rendered card shows, in document order, one a
// line: the string value of every key named in keys ("text", "title")
// anywhere in raw, the card's JSON as the platform receives it. Its
// SHA-256 is what an approver saw (bot.SeenText). truncated reports that
// a renderer cut something to fit: every cut ends with "…(truncated)" or
// says "…(truncated: N more … are not shown)".
func CardText(raw []byte, keys ...string) (text string, truncated bool) {
	var lines []string
	_ = walkTexts(json.NewDecoder(bytes.NewReader(raw)), "", keys, &lines)
	for _, l := range lines {
		if strings.Contains(l, "…(truncated") {
			truncated = true
		}
	}
	return strings.Join(lines, "\n"), truncated
}

// walkTexts appends to out the string values of keys in the JSON value
// dec reads next, where key is the name it has in its object.
func walkTexts(dec *json.Decoder, key string, keys []string, out *[]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		for dec.More() {
			k := ""
			if t == '{' {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ = kt.(string)
			}
			if err := walkTexts(dec, k, keys, out); err != nil {
				return err
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	case string:
		if slices.Contains(keys, key) {
			*out = append(*out, t)
		}
	}
	return nil
}
