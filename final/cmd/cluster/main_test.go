package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testName is a cluster name of this test process's own.
func testName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e6) }

// TestUpStatusDown: `cluster up` returns with every broker serving and
// says how to reach them; `status` finds it from its name alone (another
// process's view) and shows each partition's leader and ISR; `down`
// removes it, after which there is nothing to find.
func TestUpStatusDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	name := testName("updown")
	flags := []string{"-name", name, "-ports", "0,0,0", "-prometheus-port", "0"}
	t.Cleanup(func() { run(context.Background(), append([]string{"down"}, flags...), &bytes.Buffer{}) })

	var out bytes.Buffer
	require.NoError(t, run(ctx, append([]string{"up"}, flags...), &out), out.String())
	require.Regexp(t, `kcat -b 127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+ -L`, out.String())
	require.ErrorContains(t, run(ctx, append([]string{"up"}, flags...), &bytes.Buffer{}), "exists",
		"a second up of the same cluster is refused")

	out.Reset()
	require.NoError(t, run(ctx, append([]string{"status"}, flags...), &out), out.String())
	require.Regexp(t, name+`-broker-2\s+127\.0\.0\.1:\d+\s+true`, out.String())
	require.Regexp(t, `__consumer_offsets|controller: broker \d`, out.String())

	out.Reset()
	require.NoError(t, run(ctx, append([]string{"down"}, flags...), &out))
	require.ErrorContains(t, run(ctx, append([]string{"status"}, flags...), &bytes.Buffer{}), "no cluster")
}

// TestDemo is `make run` with short acts: the leader of orders-0 is
// killed, a new one takes over, the restarted broker rejoins every ISR,
// and the consumer ends with every acknowledged record.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := testName("demo")
	t.Cleanup(func() { run(context.Background(), []string{"down", "-name", name}, &bytes.Buffer{}) })
	var out bytes.Buffer
	err := run(ctx, []string{"demo", "-name", name, "-ports", "0,0,0", "-prometheus-port", "0", "-wait=false", "-act", "5s"}, &out)
	t.Log(out.String())
	require.NoError(t, err)
	for _, want := range []string{
		`kill -9 ` + name + `-broker-\d, the leader of orders-0`,
		`orders-0: leader (\d) -> \d \(epoch \d+\)`,
		`orders-\d: ISR shrinks \[0 1 2\] -> \[\d \d\]`,
		`orders-\d: ISR expands \[\d \d\] -> \[0 1 2\]`,
		`acknowledged [1-9]\d+, consumed [1-9]\d+ distinct`,
		`every acknowledged record was consumed: nothing lost`,
		`Removing cluster ` + name,
	} {
		require.Regexp(t, regexp.MustCompile(want), out.String())
	}
}
