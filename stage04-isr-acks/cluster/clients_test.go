package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
)

// Clients we did not write judge the idempotent producer: each must see
// InitProducerId and produce with its producer id and sequences, and what
// it wrote must read back once, in order.

func TestKcatProducesIdempotently(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: `make test` installs it (apt-get install kcat)")
	}
	tc := startCluster(t, nil)
	lines := values("kcat", 200)
	input := filepath.Join(t.TempDir(), "input")
	require.NoError(t, os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	out, err := exec.Command(kcat, "-b", strings.Join(tc.Addrs(), ","), "-P", "-t", tc.tp.Topic, "-p", "0",
		"-X", "enable.idempotence=true", "-X", "acks=all", "-l", input).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, lines, tc.readAll())
	tc.requireIdempotentBatches()
}

func TestSaramaProducesIdempotently(t *testing.T) {
	tc := startCluster(t, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1 // Sarama's rule for idempotence
	p, err := sarama.NewSyncProducer(tc.Addrs(), cfg)
	require.NoError(t, err, "Sarama refuses to start when the broker cannot give a producer id")
	defer p.Close()
	want := values("sarama", 100)
	for _, v := range want {
		_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: tc.tp.Topic, Partition: 0, Value: sarama.StringEncoder(v)})
		require.NoError(t, err)
	}
	require.Equal(t, want, tc.readAll())
	tc.requireIdempotentBatches()
}

// requireIdempotentBatches checks that the leader's log holds the batches
// with a producer id: the client did use idempotence.
func (tc *testCluster) requireIdempotentBatches() {
	tc.t.Helper()
	p, ok := tc.server(0).Replicas.Partition(tc.tp.Topic, tc.tp.Partition)
	require.True(tc.t, ok)
	st, _, err := tc.server(0).ProducerState(p)
	require.NoError(tc.t, err)
	require.Equal(tc.t, 1, st.Len(), "one producer, known to the partition")
}
