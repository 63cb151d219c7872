package config

import (
	"strings"
	"testing"
)

// TestDirectory: principals: becomes the directory of people, each by name;
// a chat identity mapped to two principals is refused when the file is
// read, with every other problem, naming both and the fix, never resolved
// to whichever came last.
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
	_, err = Parse([]byte("listen: nowhere\nprincipals:\n  - {name: a, role: member, discord: \"123\"}\n  - {name: b, role: member, discord: \"123\"}\n"), t.TempDir())
	for _, want := range []string{"principals: discord user 123 is mapped to both a and b", "map each chat identity to exactly one principal", `listen: "nowhere" is not host:port`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a config with a Discord id mapped twice (and a bad listen): %v, want %q", err, want)
		}
	}
}
