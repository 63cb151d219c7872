package config

import "fmt"

// This file holds the configuration keys of the console's area of policy
// that reads the request: where each stage of an ordered sign-off is
// posted (tools[].stages[].channels, and a rule's stages').

// checkStageChannels checks the channels stage st at key names: each
// defined under slack.channels, discord.channels or teams.channels, none
// twice.
func (c *Config) checkStageChannels(key string, st StageDecl, p *problems) {
	seen := map[string]bool{}
	for i, ch := range st.Channels {
		k := fmt.Sprintf("%s.channels[%d]", key, i)
		switch {
		case ch == "":
			p.add(k, "empty: name a channel defined under slack.channels, discord.channels or teams.channels")
		case seen[ch]:
			p.add(k, "channel %q is named twice", ch)
		case !c.channelKnown(ch):
			p.add(k, "channel %q is not defined under slack.channels, discord.channels or teams.channels", ch)
		}
		seen[ch] = true
	}
}
