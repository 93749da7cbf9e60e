package zktest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// The znodes the tests write, laid out as Kafka 2.6 writes them
// (KafkaZkClient and ZkData.scala; chapter 5 lists them).

// controllerPath is the ephemeral znode whose owner is the controller.
const controllerPath = "/controller"

// controllerZNode is the content of /controller:
// {"version":1,"brokerid":N,"timestamp":"<ms>"}.
type controllerZNode struct {
	Version   int    `json:"version"`
	BrokerID  int    `json:"brokerid"`
	Timestamp string `json:"timestamp"` // milliseconds since the epoch, as a string
}

func encodeController(brokerID int) []byte {
	return mustJSON(controllerZNode{Version: 1, BrokerID: brokerID, Timestamp: nowMillis()})
}

// brokerIDsPath holds one ephemeral znode per live broker.
const brokerIDsPath = "/brokers/ids"

// brokerZNode is the content of /brokers/ids/<id>, a broker's registration.
type brokerZNode struct {
	Version                     int               `json:"version"`
	Host                        string            `json:"host"`
	Port                        int               `json:"port"`
	JMXPort                     int               `json:"jmx_port"`
	Timestamp                   string            `json:"timestamp"`
	Endpoints                   []string          `json:"endpoints"`
	ListenerSecurityProtocolMap map[string]string `json:"listener_security_protocol_map"`
	Rack                        *string           `json:"rack"`
}

func encodeBroker(host string, port int) []byte {
	return mustJSON(brokerZNode{
		Version:                     4,
		Host:                        host,
		Port:                        port,
		JMXPort:                     -1,
		Timestamp:                   nowMillis(),
		Endpoints:                   []string{fmt.Sprintf("PLAINTEXT://%s:%d", host, port)},
		ListenerSecurityProtocolMap: map[string]string{"PLAINTEXT": "PLAINTEXT"},
	})
}

// registerBroker creates broker id's ephemeral registration, as a broker
// does at startup; it lives as long as the client's session.
func registerBroker(t *testing.T, c *zktest.Client, id int) {
	t.Helper()
	createParents(t, c, brokerIDsPath)
	path := fmt.Sprintf("%s/%d", brokerIDsPath, id)
	_, err := c.Create(path, encodeBroker("127.0.0.1", 9092+id), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err, "register broker %d", id)
}

// createParents creates the persistent znodes of path that are missing.
func createParents(t *testing.T, c *zktest.Client, path string) {
	t.Helper()
	prefix := ""
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		prefix += "/" + part
		_, err := c.Create(prefix, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			require.NoError(t, err, "create %s", prefix)
		}
	}
}

func nowMillis() string { return fmt.Sprint(time.Now().UnixMilli()) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the types above always encode
	}
	return b
}
