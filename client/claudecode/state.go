package claudecode

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/receipt"
)

// runState is what the hook keeps of an allowed call between PreToolUse
// (or PermissionRequest) and PostToolUse: enough to redeem the receipt
// once the call has run, and to check that what ran is what was approved.
type runState struct {
	RequestID          string `json:"request_id"`
	Tool               string `json:"tool"`
	Shell              bool   `json:"shell"`
	ApprovedArgsSHA256 string `json:"approved_args_sha256"`
	Receipt            string `json:"receipt"`
}

// stateTTL is how long a kept receipt waits for its PostToolUse: a
// receipt expires an hour after the approval, so it is useless after.
const stateTTL = 2 * time.Hour

func (h *Hook) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// stateKeys are the names an allowed call's state is kept under: its
// tool_use_id (PreToolUse and PostToolUse both carry it), and otherwise
// the tool and the input that will run (PermissionRequest has no
// tool_use_id).
func stateKeys(ev Event, input json.RawMessage) []string {
	var keys []string
	if ev.ToolUseID != "" {
		keys = append(keys, "tool_use_id\x00"+ev.ToolUseID)
	}
	if canon, err := receipt.Canonical(input); err == nil {
		keys = append(keys, "input\x00"+ev.ToolName+"\x00"+string(canon))
	}
	return keys
}

func (h *Hook) statePath(session, key string) string {
	sum := sha256.Sum256([]byte(session + "\x00" + key))
	return filepath.Join(h.Config.StateDir, hex.EncodeToString(sum[:16])+".json")
}

// saveRun keeps ap's receipt for the PostToolUse of the call that will run
// with input. It also drops kept receipts older than stateTTL.
func (h *Hook) saveRun(ev Event, input json.RawMessage, ap *client.Approval) error {
	if h.Config.StateDir == "" {
		return errors.New("hooks.claude_code.state_dir is not set and there is no home directory")
	}
	if err := os.MkdirAll(h.Config.StateDir, 0o700); err != nil {
		return err
	}
	h.prune()
	keys := stateKeys(ev, input)
	if len(keys) == 0 {
		return errors.New("the call has neither a tool_use_id nor a JSON input to name it by")
	}
	b, err := json.Marshal(runState{RequestID: ap.RequestID, Tool: ap.Tool, Shell: ev.ToolName == "Bash" || ev.ToolName == "PowerShell",
		ApprovedArgsSHA256: ap.Payload.ApprovedArgsSHA256, Receipt: ap.Receipt})
	if err != nil {
		return err
	}
	path := h.statePath(ev.SessionID, keys[0])
	tmp, err := os.CreateTemp(h.Config.StateDir, ".run-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// takeRun returns and removes the state kept for the call of a
// PostToolUse event: nil when there is none (Countersign did not approve
// it through this hook, or the state expired).
func (h *Hook) takeRun(ev Event) (*runState, error) {
	if h.Config.StateDir == "" {
		return nil, nil
	}
	for _, key := range stateKeys(ev, ev.ToolInput) {
		path := h.statePath(ev.SessionID, key)
		fi, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(path)
		os.Remove(path)
		if err != nil {
			return nil, err
		}
		if h.now().Sub(fi.ModTime()) > stateTTL {
			return nil, nil
		}
		var st runState
		if err := json.Unmarshal(b, &st); err != nil || st.Receipt == "" || st.Tool == "" {
			return nil, fmt.Errorf("%s is not a kept receipt", path)
		}
		return &st, nil
	}
	return nil, nil
}

// prune removes kept receipts older than stateTTL, whose PostToolUse never
// came (the call failed, or was interrupted).
func (h *Hook) prune() {
	entries, err := os.ReadDir(h.Config.StateDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".run-")) {
			continue
		}
		if fi, err := e.Info(); err == nil && h.now().Sub(fi.ModTime()) > stateTTL {
			os.Remove(filepath.Join(h.Config.StateDir, e.Name()))
		}
	}
}
