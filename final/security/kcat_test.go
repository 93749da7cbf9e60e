package security

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: `make stage02` installs it (apt-get install kcat)")
	}
	return path
}

// librdkafka, through kcat, produces and consumes through the gate with
// each mechanism, and a wrong password fails to connect.
func TestKcatAuthenticatesWithEachMechanism(t *testing.T) {
	kcat := kcatPath(t)
	gb := startGatedBroker(t, testSASLConfig(t))
	input := filepath.Join(t.TempDir(), "lines.txt")
	var lines []string
	for i := range 50 {
		lines = append(lines, "line "+strings.Repeat("x", i))
	}
	require.NoError(t, os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

	for _, mech := range []string{PLAIN, ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			topic := "lines-" + strings.ToLower(mech)
			sasl := func(password string, args ...string) []string {
				return append([]string{"-b", gb.addr(), "-X", "security.protocol=SASL_PLAINTEXT",
					"-X", "sasl.mechanisms=" + mech, "-X", "sasl.username=alice", "-X", "sasl.password=" + password}, args...)
			}
			out, err := exec.Command(kcat, sasl("alice-secret", "-P", "-t", topic, "-l", input)...).CombinedOutput()
			require.NoError(t, err, "kcat -P: %s", out)

			var stdout, stderr bytes.Buffer
			cmd := exec.Command(kcat, sasl("alice-secret", "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "kcat -C: %s", stderr.String())
			require.Equal(t, lines, strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"))

			out, err = exec.Command(kcat, sasl("wrong", "-L", "-m", "2")...).CombinedOutput()
			require.Error(t, err, "kcat -L with a wrong password: %s", out)
			require.Contains(t, string(out), "Authentication failed")
		})
	}
}
