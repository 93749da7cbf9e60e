package loadgen_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
)

// echoServer answers every request with itself: the correlation id comes
// first, as loadgen expects. wrong shifts the id, to test the check.
func echoServer(t *testing.T, wrong bool) string {
	t.Helper()
	cfg := network.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := network.NewServer(cfg, network.HandlerFunc(func(r *network.Request) {
		resp := binary.BigEndian.AppendUint32(nil, uint32(len(r.Body)))
		resp = append(resp, r.Body...)
		if wrong {
			resp[4+3]++
		}
		r.Respond(network.Response{Sends: []network.Send{network.BytesSend(resp)}})
	}))
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
	})
	return srv.Addr().String()
}

func request(corr int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(corr))
}

func TestRunSendsExactlyRequests(t *testing.T) {
	addr := echoServer(t, false)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 8, Requests: 1000, MakeRequest: request})
	require.NoError(t, err)
	require.EqualValues(t, 1000, res.Requests)
	require.Equal(t, 8, res.Conns)
	require.Positive(t, res.Rate())
	require.LessOrEqual(t, res.P50, res.P99)
	require.LessOrEqual(t, res.P99, res.Max)
	require.Contains(t, res.String(), "1000 requests on 8 connections")
}

func TestRunStopsAfterDuration(t *testing.T) {
	addr := echoServer(t, false)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 4, Duration: 100 * time.Millisecond, MakeRequest: request})
	require.NoError(t, err)
	require.Positive(t, res.Requests)
	require.GreaterOrEqual(t, res.Elapsed, 100*time.Millisecond)
}

func TestRunChecksCorrelationIDs(t *testing.T) {
	addr := echoServer(t, true)
	_, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 2, Requests: 10, MakeRequest: request})
	require.ErrorContains(t, err, "correlation id")
}

func TestRunNeedsAStop(t *testing.T) {
	_, err := loadgen.Run(context.Background(), loadgen.Config{Addr: "127.0.0.1:1", Conns: 1, MakeRequest: request})
	require.Error(t, err)
}
