package admin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/admin"
)

// result is what one run of the command printed and returned.
type result struct {
	out, err string
	code     int
}

// run runs `admin args...` in process and returns what it printed.
func run(t testing.TB, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := admin.Run(ctx, args, &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

// ok runs the command and requires it to succeed, returning stdout.
func ok(t testing.TB, args ...string) string {
	t.Helper()
	r := run(t, args...)
	require.Equal(t, 0, r.code, "admin %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.out, r.err)
	return r.out
}

// fails runs the command and requires exit status 1 with want in
// its standard error.
func fails(t testing.TB, want string, args ...string) result {
	t.Helper()
	r := run(t, args...)
	require.Equal(t, 1, r.code, "admin %s should fail\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.out, r.err)
	require.Contains(t, r.err, want, "admin %s", strings.Join(args, " "))
	return r
}

// fakeCluster starts a kfake cluster (three brokers unless opts say
// otherwise) and returns it with its bootstrap address.
func fakeCluster(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, strings.Join(c.ListenAddrs(), ",")
}

// observer is a franz-go admin client for checking the cluster's state
// after a command, the way a test looks at the world rather than at
// what the command says about it. kadm caches metadata for at least
// MetadataMinAge (10ms here), and kfake answers faster than that: a
// check of topics after a change takes a new observer.
func observer(t testing.TB, bootstrap string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.MetadataMinAge(10 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// ctxT is a context for one test's checks.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produce writes n records to each of a topic's partitions, keyed so
// that each lands on a chosen partition.
func produce(t testing.TB, bootstrap, topic string, partitions int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for p := range partitions {
		for range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")})
		}
	}
	require.NoError(t, cl.ProduceSync(ctxT(t), recs...).FirstErr())
}

// urlID is a topic ID as Kafka prints it.
func urlID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
