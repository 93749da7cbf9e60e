package repl

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoopRunsAScriptAsATranscript(t *testing.T) {
	var out strings.Builder
	var ran [][]string
	err := Loop(strings.NewReader("ignored"), &out, "produce 5; ; fail;quit; produce 1", func(args []string) error {
		ran = append(ran, args)
		if args[0] == "fail" {
			return errors.New("it failed")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"produce", "5"}, {"fail"}}, ran, "blank lines skipped, nothing after quit")
	require.Equal(t, "> produce 5\n> fail\nerror: it failed\n> quit\n", out.String())
}

func TestLoopPromptsWhenInteractive(t *testing.T) {
	var out strings.Builder
	require.NoError(t, Loop(strings.NewReader("state\n"), &out, "", func([]string) error { return nil }))
	require.Equal(t, "> > ", out.String(), "a prompt before each read, the last at the end of input")
}
