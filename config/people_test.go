package config

import (
	"strings"
	"testing"
)

// TestDirectory: principals: becomes the directory of people, each by name;
// a chat identity mapped to two principals is refused naming both and the
// fix, never resolved to whichever came last.
func TestDirectory(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("principals:\n  - {name: dr_lee, role: member, discord: \"123\"}\n  - {name: dr_shah, role: admin, slack: U0SHAH}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Directory()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := d.Person("dr_shah"); !ok || p.Role != "admin" || len(d.People()) != 2 {
		t.Errorf("Person(dr_shah) = %+v %v, %d people; want the admin of 2", p, ok, len(d.People()))
	}
	c, err = Parse([]byte("principals:\n  - {name: a, role: member, discord: \"123\"}\n  - {name: b, role: member, discord: \"123\"}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Directory()
	for _, want := range []string{"discord user 123 is mapped to both a and b", "map each chat identity to exactly one principal"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Directory with a Discord id mapped twice: %v, want %q", err, want)
		}
	}
}
