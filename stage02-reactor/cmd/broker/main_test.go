package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary run as the broker command in a child.
func TestMain(m *testing.M) {
	if os.Getenv("BROKER_TEST_MAIN") != "" {
		main()
		return
	}
	os.Exit(m.Run())
}

func brokerCommand(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BROKER_TEST_MAIN=1")
	return cmd
}

func TestBrokerStartsFromPropertiesAndStopsCleanlyOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	require.NoError(t, os.WriteFile(props, []byte("broker.id=3\nlog.dirs="+filepath.Join(dir, "logs")+
		"\nlisteners=PLAINTEXT://127.0.0.1:9092\nzookeeper.connect=localhost:2181\n"), 0o644))

	cmd := brokerCommand(t, props, "--override", "listeners=PLAINTEXT://127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(re string) string {
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "the broker exited before logging %q", re)
				if regexp.MustCompile(re).MatchString(l) {
					return l
				}
			case <-deadline:
				t.Fatalf("no log line matching %q", re)
			}
		}
	}
	waitLine(`configuration key not used by this stage.*key=zookeeper.connect`)
	ready := waitLine(`msg="broker ready"`)
	require.Contains(t, ready, "broker.id=3")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	waitLine(`msg="broker shut down cleanly"`)
	require.NoError(t, cmd.Wait())
	_, err = os.Stat(filepath.Join(dir, "logs", ".kafka_cleanshutdown"))
	require.NoError(t, err)
}

func TestBadConfigStopsStartUpNamingTheKey(t *testing.T) {
	out, err := brokerCommand(t, "--override", "num.io.threads=many").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), `broker: invalid value "many" for configuration num.io.threads: not a number`)
}
