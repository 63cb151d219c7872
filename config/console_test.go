package config

import (
	"strings"
	"testing"
)

// stageChannelsYAML signs order_medication above 10 mg off in two stages,
// each posted to a channel of its own.
const stageChannelsYAML = `tools:
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {dose_mg: {type: number}}}
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {roles: [member]}, channels: [doctors]}
          - {name: pharmacist, approvers: {roles: [member]}, channels: [pharmacy]}
slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  channels: {default: C0DEFAULT, doctors: C0DOCS, pharmacy: C0PHARM}
`

// TestStageChannelsConfig: a stage's channels are read into the tool's
// stages; each must be defined on a chat surface, named once; start
// refuses otherwise, naming the key.
func TestStageChannelsConfig(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(stageChannelsYAML), t.TempDir())
	if err != nil {
		t.Fatalf("the valid config: %v", err)
	}
	if got := cfg.Tools[0].Rules[0].Stages[1].Channels; len(got) != 1 || got[0] != "pharmacy" {
		t.Fatalf("the pharmacist stage's channels as read: %v, want [pharmacy]", got)
	}
	for _, tc := range []struct{ from, to, key string }{
		{"channels: [pharmacy]}", "channels: [pharmacie]}", `tools[0].rules[0].stages[1].channels[0]: channel "pharmacie" is not defined`},
		{"channels: [doctors]}", "channels: [doctors, doctors]}", `tools[0].rules[0].stages[0].channels[1]: channel "doctors" is named twice`},
		{"channels: [doctors]}", `channels: [""]}`, `tools[0].rules[0].stages[0].channels[0]: empty`},
	} {
		_, err := Parse([]byte(strings.Replace(stageChannelsYAML, tc.from, tc.to, 1)), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: the config's problems %v do not name %q", tc.to, err, tc.key)
		}
	}
}
