package config

import (
	"fmt"
	"strings"
)

// This file holds tools[].stages[].notify (and a rule's stages'): the
// people sent the card directly when a stage opens.

// MaxStageNotify bounds the people one stage notifies.
const MaxStageNotify = 20

// checkStageNotify checks the people stage st at key notifies: each a
// principal configured under principals (by name), none twice, each with
// an account on a chat surface (slack, discord) or an email address to be
// reached at.
func (c *Config) checkStageNotify(key string, st StageDecl, p *problems) {
	if len(st.Notify) > MaxStageNotify {
		p.add(key+".notify", "%d people; at most %d (post to a channel instead: channels:)", len(st.Notify), MaxStageNotify)
	}
	seen := map[string]bool{}
	for i, name := range st.Notify {
		k := fmt.Sprintf("%s.notify[%d]", key, i)
		n := strings.ToLower(strings.TrimSpace(name))
		var found *PrincipalDecl
		for j := range c.Principals {
			if strings.EqualFold(c.Principals[j].Name, strings.TrimSpace(name)) {
				found = &c.Principals[j]
			}
		}
		switch {
		case n == "":
			p.add(k, "empty: name a person configured under principals (principals[].name)")
		case seen[n]:
			p.add(k, "%q is named twice", name)
		case found == nil:
			p.add(k, "%q is not a person configured under principals (principals[].name)", name)
		case found.Slack == "" && found.Discord == "" && found.Teams == "" && found.Email == "":
			p.add(k, "%q has no slack, discord, teams or email under principals, so a direct message cannot reach them", name)
		}
		seen[n] = true
	}
}
