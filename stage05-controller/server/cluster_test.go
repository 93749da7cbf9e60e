package server_test

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// describeCluster sends DescribeCluster to broker id.
func describeCluster(t *testing.T, cl *kgo.Client, id int32, mutate func(*kmsg.DescribeClusterRequest)) *kmsg.DescribeClusterResponse {
	t.Helper()
	resp, err := tryDescribeCluster(cl, id, mutate)
	require.NoError(t, err)
	return resp
}

// tryDescribeCluster is describeCluster for a poll: the client may not
// know broker id yet (its first Metadata answer came from a broker that
// had not heard of it: "unknown broker"), which the poll waits out.
func tryDescribeCluster(cl *kgo.Client, id int32, mutate func(*kmsg.DescribeClusterRequest)) (*kmsg.DescribeClusterResponse, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	if mutate != nil {
		mutate(req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return req.RequestWith(ctx, cl.Broker(int(id)))
}

// brokersKnownTo is how many brokers broker id's DescribeCluster answer
// lists, or -1 if it could not be asked.
func brokersKnownTo(cl *kgo.Client, id int32) int {
	resp, err := tryDescribeCluster(cl, id, nil)
	if err != nil {
		return -1
	}
	return len(resp.Brokers)
}

// TestDescribeClusterAndLogDirsAnswerAdminClients: every broker of three
// answers DescribeCluster with the three brokers (id, host, port), the
// cluster id of /cluster/id and the controller of /controller; a kill -9
// leaves two in every survivor's answer. kadm's DescribeAllLogDirs shows
// each broker's log directory with a replica of each partition, and their
// sizes grow after records are produced.
func TestDescribeClusterAndLogDirsAnswerAdminClients(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 3, nil)
	zk := observer(t, ens)
	cl := client(t, c)
	clusterID, err := zk.ClusterID()
	require.NoError(t, err)
	controllerID := waitController(t, zk, func(int32) bool { return true })

	wantBrokers := func(ids ...int32) []kmsg.DescribeClusterResponseBroker {
		var out []kmsg.DescribeClusterResponseBroker
		for _, id := range ids {
			host, port, err := net.SplitHostPort(c.Broker(id).Addr())
			require.NoError(t, err)
			p, err := strconv.Atoi(port)
			require.NoError(t, err)
			out = append(out, kmsg.DescribeClusterResponseBroker{NodeID: id, Host: host, Port: int32(p)})
		}
		return out
	}
	for _, id := range []int32{0, 1, 2} {
		require.Eventually(t, func() bool {
			return brokersKnownTo(cl, id) == 3
		}, 30*time.Second, 20*time.Millisecond, "broker %d knows every broker", id)
		resp := describeCluster(t, cl, id, nil)
		require.Zero(t, resp.ErrorCode)
		require.Equal(t, clusterID, resp.ClusterID)
		require.Equal(t, controllerID, resp.ControllerID)
		require.Equal(t, int8(1), resp.EndpointType, "brokers")
		require.ElementsMatch(t, wantBrokers(0, 1, 2), resp.Brokers)
		require.Equal(t, int32(-2147483648), resp.ClusterAuthorizedOperations, "not asked")
	}
	asked := describeCluster(t, cl, 0, func(r *kmsg.DescribeClusterRequest) { r.IncludeClusterAuthorizedOperations = true })
	require.Equal(t, int32(1<<5|1<<7|1<<8|1<<9|1<<10|1<<11|1<<12), asked.ClusterAuthorizedOperations,
		"no authorizer: every cluster operation")
	controllers := describeCluster(t, cl, 0, func(r *kmsg.DescribeClusterRequest) { r.EndpointType = 2 })
	require.Equal(t, kerr.MismatchedEndpointType.Code, controllers.ErrorCode)

	// Log directories, through kadm.
	createTopic(t, c, "sized", 2, nil)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sizes := func() map[int32]map[int32]int64 { // broker -> partition -> size
		dirs, err := adm.DescribeAllLogDirs(ctx, nil)
		require.NoError(t, err)
		out := map[int32]map[int32]int64{}
		for id, byDir := range dirs {
			require.Len(t, byDir, 1, "broker %d has one log directory", id)
			for dir, d := range byDir {
				require.NoError(t, d.Err)
				want, err := filepath.Abs(c.Broker(id).LogDir())
				require.NoError(t, err)
				require.Equal(t, want, dir)
				require.Positive(t, d.TotalBytes)
				out[id] = map[int32]int64{}
				for p, dp := range d.Topics["sized"] {
					require.Zero(t, dp.OffsetLag)
					out[id][p] = dp.Size
				}
			}
		}
		return out
	}
	empty := map[int32]int64{0: 0, 1: 0}
	require.Equal(t, map[int32]map[int32]int64{0: empty, 1: empty, 2: empty}, sizes(), "every broker has an empty replica of each")
	roundTrip(t, c, "sized", 2, "bytes", 10)
	require.Eventually(t, func() bool {
		for _, byPartition := range sizes() {
			if byPartition[0] == 0 || byPartition[1] == 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every replica grew")
	one, err := adm.DescribeBrokerLogDirs(ctx, 1, kadm.TopicsSet{"sized": {1: {}}})
	require.NoError(t, err)
	require.Len(t, one, 1)
	for _, d := range one {
		require.Len(t, d.Topics["sized"], 1, "only the partition asked for")
		require.Positive(t, d.Topics["sized"][1].Size)
	}

	// A broker dies: the survivors stop listing it.
	c.Broker(2).Kill()
	for _, id := range []int32{0, 1} {
		require.Eventually(t, func() bool {
			return brokersKnownTo(cl, id) == 2
		}, 60*time.Second, 20*time.Millisecond, "broker %d forgets broker 2", id)
		require.ElementsMatch(t, wantBrokers(0, 1), describeCluster(t, cl, id, nil).Brokers)
	}
}
