package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPropertiesSyntax(t *testing.T) {
	props, err := ParseProperties("a=1\nb : 2\nc 3\n! comment\n  d=x\\\n   y\n\ne=\n")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "1", "b": "2", "c": "3", "d": "xy", "e": ""}, props)
}
