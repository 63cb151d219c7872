package bot

import (
	"testing"

	"github.com/countersign/countersign/policy"
)

// TestDirectoryAnswersWhoIsThisPerson: a name, the people in the
// config's order, and a directory user matched by name first, then by
// email or web identity, case-insensitively; nobody else.
func TestDirectoryAnswersWhoIsThisPerson(t *testing.T) {
	t.Parallel()
	d, err := NewDirectory([]ChatPrincipal{
		{Name: "dr_smith", Role: policy.RoleMember, Email: "smith@hospital.example", Web: "jsmith@sso.example"},
		{Name: "nurse_lee", Role: policy.RoleMember, Slack: "T1/U1"},
		{Name: "ops", Role: policy.RoleAdmin, Email: "DR_SMITH"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := d.Person("nurse_lee"); !ok || p.Slack != "T1/U1" {
		t.Errorf("Person(nurse_lee) = %+v %v, want the configured nurse_lee", p, ok)
	}
	if _, ok := d.Person("nobody"); ok {
		t.Error("Person(nobody) found someone")
	}
	var names []string
	for _, p := range d.People() {
		names = append(names, p.Name)
	}
	if got, want := len(names), 3; got != want || names[0] != "dr_smith" || names[2] != "ops" {
		t.Errorf("People() = %v, want dr_smith, nurse_lee, ops in the config's order", names)
	}
	for _, tt := range []struct {
		user   string
		emails []string
		want   string
	}{
		{"DR_SMITH", nil, "dr_smith"}, // the name wins over ops's email
		{"someone", []string{" Smith@Hospital.example "}, "dr_smith"},
		{"jsmith@sso.example", nil, "dr_smith"},
		{"nurse_lee", nil, "nurse_lee"},
		{"stranger", []string{"stranger@hospital.example", ""}, ""},
	} {
		if got := d.Match(tt.user, tt.emails); got != tt.want {
			t.Errorf("Match(%q, %q) = %q, want %q", tt.user, tt.emails, got, tt.want)
		}
	}
	var none *Directory
	if none.Match("dr_smith", nil) != "" || len(none.People()) != 0 {
		t.Error("a nil directory answers someone")
	}
}
