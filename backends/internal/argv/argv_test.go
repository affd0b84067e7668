package argv

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAppend(t *testing.T) {
	args := []string{"token", "channel", "PUBLISH", "SPUBLISH", "", "leave", "stay", "0", "1", "10000"}
	got := Append(make([]any, 0, len(args)), args...)
	want := make([]any, len(args))
	for i, a := range args {
		want[i] = a
	}
	assert.Equal(t, want, got, "the boxed arguments differ from the strings")

	constants := []string{"PUBLISH", "SPUBLISH", "leave", "stay", "0", "1", ""}
	dst := make([]any, 0, len(constants))
	allocs := testing.AllocsPerRun(100, func() { dst = Append(dst[:0], constants...) })
	assert.Zero(t, allocs, "core's constant arguments are boxed on every call")
}
