package conformance

import (
	"strings"
	"testing"

	"github.com/go-redlock/redlock/core"
)

// TestEveryScriptChecked: the scripts group has checks for every script core runs, and the
// noscript group knows what each replies on an empty server, so a script added to core
// cannot go unchecked.
func TestEveryScriptChecked(t *testing.T) {
	checks := scriptChecks()
	for _, s := range core.Scripts() {
		found := false
		for _, c := range checks {
			found = found || strings.HasPrefix(c.name, s.Name()+"/")
		}
		if !found {
			t.Errorf("the scripts group has no check for core script %q", s.Name())
		}
		if _, _, want := emptyCall(s, core.NewKeys("p:", "n")); want == nil && emptyStrings(s) == nil {
			t.Errorf("the noscript group does not know what core script %q replies", s.Name())
		}
	}
}

// TestCheckNamesUnique: every check has a distinct name, so a failure names one check.
func TestCheckNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range groups {
		for _, c := range g.checks {
			name := g.name + "/" + c.name
			if seen[name] {
				t.Errorf("two checks are called %q", name)
			}
			seen[name] = true
		}
	}
}
