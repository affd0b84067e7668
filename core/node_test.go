package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInts(t *testing.T) {
	got, err := Ints(acquireScript, []any{int64(1), int64(-1), int64(1 << 62)})
	require.NoError(t, err)
	assert.Equal(t, []int64{1, -1, 1 << 62}, got)
	for _, bad := range []any{nil, "OK", int64(1), []any{int64(1), "2"}} {
		_, err := Ints(acquireScript, bad)
		assert.ErrorContains(t, err, "acquire script replied", "%#v", bad)
	}
}
