package kafkazk

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"
)

// The JSON of each znode, byte for byte as Kafka 2.8 writes it. Kafka
// builds these from hash maps, so its key order is neither alphabetical
// nor the order of its source; object writes keys in a given order, and
// each encoder lists them as Kafka's output has them (testdata/ holds the
// golden files, with their sources).

// field is one key and value of a JSON object.
type field struct {
	key   string
	value any
}

// object writes a JSON object with its keys in the order given.
func object(fields ...field) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		switch v := f.value.(type) {
		case json.RawMessage:
			b.Write(v)
		default:
			enc, err := json.Marshal(v)
			if err != nil {
				panic(fmt.Sprintf("kafkazk: encode %s: %v", f.key, err)) // only plain values are passed
			}
			b.Write(enc)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// stringMap writes a JSON object of strings, keys in sorted order.
func stringMap(m map[string]string) json.RawMessage {
	fields := make([]field, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fields = append(fields, field{k, m[k]})
	}
	return object(fields...)
}

// millis is a timestamp as Kafka writes it in znodes: a decimal string.
func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// ControllerInfo is /controller's content:
//
//	{"version":1,"brokerid":0,"timestamp":"1700000000000"}
type ControllerInfo struct {
	BrokerID  int32
	Timestamp time.Time
}

// Encode returns /controller's JSON.
func (c ControllerInfo) Encode() []byte {
	return object(field{"version", 1}, field{"brokerid", c.BrokerID}, field{"timestamp", millis(c.Timestamp)})
}

// DecodeControllerInfo reads /controller.
func DecodeControllerInfo(data []byte) (ControllerInfo, error) {
	var raw struct {
		BrokerID  *int32 `json:"brokerid"`
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal(data, &raw); err != nil || raw.BrokerID == nil {
		return ControllerInfo{}, fmt.Errorf("kafkazk: %s holds %q: not a controller registration", ControllerPath, data)
	}
	ms, _ := strconv.ParseInt(raw.Timestamp, 10, 64)
	return ControllerInfo{BrokerID: *raw.BrokerID, Timestamp: time.UnixMilli(ms)}, nil
}

// Endpoint is one listener of a broker: PLAINTEXT://host:port.
type Endpoint struct {
	Listener         string // the listener's name, PLAINTEXT by default
	SecurityProtocol string // PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
	Host             string
	Port             int
}

// String is the endpoint as Kafka writes it: LISTENER://host:port.
func (e Endpoint) String() string {
	return e.Listener + "://" + net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
}

// ParseEndpoint reads LISTENER://host:port.
func ParseEndpoint(s string) (Endpoint, error) {
	name, addr, ok := bytes.Cut([]byte(s), []byte("://"))
	if !ok || len(name) == 0 {
		return Endpoint{}, fmt.Errorf("kafkazk: endpoint %q is not LISTENER://host:port", s)
	}
	host, port, err := net.SplitHostPort(string(addr))
	if err != nil {
		return Endpoint{}, fmt.Errorf("kafkazk: endpoint %q: %w", s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return Endpoint{}, fmt.Errorf("kafkazk: endpoint %q: bad port", s)
	}
	return Endpoint{Listener: string(name), Host: host, Port: p}, nil
}

// BrokerInfo is a broker's registration, /brokers/ids/<id>, version 5
// (Kafka 2.7 and later):
//
//	{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
//	 "endpoints":["PLAINTEXT://broker0.example:9092"],"jmx_port":-1,
//	 "port":9092,"host":"broker0.example","version":5,"timestamp":"1700000000000"}
//
// host and port repeat the first PLAINTEXT endpoint, for clients older
// than 0.10 (-1 and null without one). A "rack" key appears only when
// broker.rack is set.
type BrokerInfo struct {
	ID        int32
	Endpoints []Endpoint
	Rack      string // broker.rack; "" for none
	JmxPort   int    // -1: none
	Timestamp time.Time
}

// brokerVersion is the registration's version this package writes.
const brokerVersion = 5

// Encode returns the registration's JSON.
func (b BrokerInfo) Encode() []byte {
	var protocols []field // in the listeners' order, as Kafka writes up to four
	endpoints := make([]string, 0, len(b.Endpoints))
	var host any // null without a PLAINTEXT endpoint, as Kafka
	port := -1
	for _, e := range b.Endpoints {
		protocols = append(protocols, field{e.Listener, e.SecurityProtocol})
		endpoints = append(endpoints, e.String())
		if e.SecurityProtocol == "PLAINTEXT" && host == nil {
			host, port = e.Host, e.Port
		}
	}
	fields := []field{
		{"features", json.RawMessage("{}")},
		{"listener_security_protocol_map", json.RawMessage(object(protocols...))},
		{"endpoints", endpoints},
	}
	if b.Rack != "" {
		fields = append(fields, field{"rack", b.Rack})
	}
	fields = append(fields,
		field{"jmx_port", b.JmxPort},
		field{"port", port},
		field{"host", host},
		field{"version", brokerVersion},
		field{"timestamp", millis(b.Timestamp)})
	return object(fields...)
}

// DecodeBrokerInfo reads a registration of version 4 or 5 (the versions
// with listener_security_protocol_map).
func DecodeBrokerInfo(id int32, data []byte) (BrokerInfo, error) {
	var raw struct {
		Version   int               `json:"version"`
		Protocols map[string]string `json:"listener_security_protocol_map"`
		Endpoints []string          `json:"endpoints"`
		Rack      string            `json:"rack"`
		JmxPort   int               `json:"jmx_port"`
		Timestamp string            `json:"timestamp"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return BrokerInfo{}, fmt.Errorf("kafkazk: %s holds %q: %w", BrokerPath(id), data, err)
	}
	if raw.Version < 4 {
		return BrokerInfo{}, fmt.Errorf("kafkazk: %s: registration version %d, want 4 or later", BrokerPath(id), raw.Version)
	}
	b := BrokerInfo{ID: id, Rack: raw.Rack, JmxPort: raw.JmxPort}
	ms, _ := strconv.ParseInt(raw.Timestamp, 10, 64)
	b.Timestamp = time.UnixMilli(ms)
	for _, s := range raw.Endpoints {
		e, err := ParseEndpoint(s)
		if err != nil {
			return BrokerInfo{}, err
		}
		e.SecurityProtocol = raw.Protocols[e.Listener]
		b.Endpoints = append(b.Endpoints, e)
	}
	return b, nil
}

// TopicID is a topic's id, Kafka's Uuid: 16 random bytes, written as
// URL-safe base64 without padding (22 characters).
type TopicID [16]byte

// String is the id as Kafka writes it.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseTopicID reads an id written by String.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("kafkazk: topic id %q is not 22 characters of URL-safe base64", s)
	}
	copy(id[:], b)
	return id, nil
}

// TopicAssignment is /brokers/topics/<topic>, version 3 (Kafka 2.8):
// each partition's replicas, in preference order (the first is the
// preferred leader), the replicas a reassignment is adding and removing,
// and the topic id.
//
//	{"partitions":{"0":[0,1,2]},"topic_id":"…","adding_replicas":{},"removing_replicas":{},"version":3}
type TopicAssignment struct {
	ID       TopicID
	Replicas map[int32][]int32 // by partition
	Adding   map[int32][]int32 // by partition: the reassignment's target replicas not yet in Replicas' old set
	Removing map[int32][]int32
}

// partitionMap writes {"0":[…],"1":[…]} in the order Kafka 2.8 (its
// Scala 2.13 build) writes it: the iteration order of a Scala 2.13
// mutable.HashMap with those keys, which is partition order up to 11
// partitions and hash order after ("11","0","1",… at 12).
func partitionMap(m map[int32][]int32) json.RawMessage {
	keys := make([]string, 0, len(m))
	for p := range m {
		keys = append(keys, strconv.Itoa(int(p)))
	}
	fields := make([]field, 0, len(m))
	for _, k := range scalaHashMapOrder(keys) {
		p, _ := strconv.Atoi(k)
		r := m[int32(p)]
		if r == nil {
			r = []int32{}
		}
		fields = append(fields, field{k, r})
	}
	return object(fields...)
}

// scalaHashMapOrder orders keys as a Scala 2.13 mutable.HashMap built
// empty and filled with them iterates: by bucket, h & (n-1), then by h
// within a bucket, where h is Java's String.hashCode spread as h ^ h>>>16
// and n the table size, 16 doubled while the count reaches 3/4 of it.
func scalaHashMapOrder(keys []string) []string {
	n := int32(16)
	for float64(len(keys)) >= 0.75*float64(n) {
		n *= 2
	}
	spread := func(s string) int32 {
		var h int32
		for _, r := range s { // Java hashes UTF-16 code units; partition numbers are ASCII
			h = 31*h + r
		}
		return h ^ int32(uint32(h)>>16)
	}
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b string) int {
		ha, hb := spread(a), spread(b)
		if ba, bb := ha&(n-1), hb&(n-1); ba != bb {
			return int(ba - bb)
		}
		return cmp.Compare(ha, hb)
	})
	return out
}

// Encode returns the assignment's JSON.
func (a TopicAssignment) Encode() []byte {
	return object(
		field{"partitions", partitionMap(a.Replicas)},
		field{"topic_id", a.ID.String()},
		field{"adding_replicas", partitionMap(a.Adding)},
		field{"removing_replicas", partitionMap(a.Removing)},
		field{"version", 3})
}

// DecodeTopicAssignment reads /brokers/topics/<topic> of any version (a
// version below 3 has no topic id: the zero TopicID).
func DecodeTopicAssignment(topic string, data []byte) (TopicAssignment, error) {
	var raw struct {
		Partitions map[string][]int32 `json:"partitions"`
		TopicID    string             `json:"topic_id"`
		Adding     map[string][]int32 `json:"adding_replicas"`
		Removing   map[string][]int32 `json:"removing_replicas"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return TopicAssignment{}, fmt.Errorf("kafkazk: %s holds %q: %w", TopicPath(topic), data, err)
	}
	var a TopicAssignment
	var err error
	if raw.TopicID != "" {
		if a.ID, err = ParseTopicID(raw.TopicID); err != nil {
			return a, err
		}
	}
	conv := func(m map[string][]int32) (map[int32][]int32, error) {
		out := make(map[int32][]int32, len(m))
		for k, v := range m {
			p, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("kafkazk: %s: partition %q", TopicPath(topic), k)
			}
			out[int32(p)] = v
		}
		return out, nil
	}
	if a.Replicas, err = conv(raw.Partitions); err != nil {
		return a, err
	}
	if a.Adding, err = conv(raw.Adding); err != nil {
		return a, err
	}
	a.Removing, err = conv(raw.Removing)
	return a, err
}

// EncodeTopicConfig returns /config/topics/<topic>'s JSON: the topic's
// overrides of the broker defaults.
//
//	{"version":1,"config":{"cleanup.policy":"compact"}}
func EncodeTopicConfig(config map[string]string) []byte {
	if config == nil {
		config = map[string]string{}
	}
	return object(field{"version", 1}, field{"config", stringMap(config)})
}

// DecodeTopicConfig reads /config/topics/<topic>.
func DecodeTopicConfig(data []byte) (map[string]string, error) {
	var raw struct {
		Config map[string]string `json:"config"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("kafkazk: topic config %q: %w", data, err)
	}
	if raw.Config == nil {
		raw.Config = map[string]string{}
	}
	return raw.Config, nil
}

// EncodeControllerEpoch returns /controller_epoch's data: the epoch in
// decimal, no JSON (Kafka's ControllerEpochZNode.encode). A fresh
// cluster's first controller creates it at 0, then its election writes 1.
func EncodeControllerEpoch(epoch int32) []byte {
	return []byte(strconv.Itoa(int(epoch)))
}

// EncodeConfigChange returns a /config/changes/config_change_<seq>
// notification's JSON, version 2: which entity's config changed.
//
//	{"version":2,"entity_path":"topics/orders"}
func EncodeConfigChange(entityPath string) []byte {
	return object(field{"version", 2}, field{"entity_path", entityPath})
}

// DecodeConfigChange reads a notification's entity path ("topics/orders").
func DecodeConfigChange(data []byte) (string, error) {
	var raw struct {
		EntityPath string `json:"entity_path"`
	}
	if err := json.Unmarshal(data, &raw); err != nil || raw.EntityPath == "" {
		return "", fmt.Errorf("kafkazk: config change %q has no entity_path", data)
	}
	return raw.EntityPath, nil
}

// EncodeClusterID returns /cluster/id's JSON. Kafka writes the version as
// a string here, unlike everywhere else.
//
//	{"version":"1","id":"…"}
func EncodeClusterID(id string) []byte {
	return object(field{"version", "1"}, field{"id", id})
}

// DecodeClusterID reads /cluster/id.
func DecodeClusterID(data []byte) (string, error) {
	var raw struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &raw); err != nil || raw.ID == "" {
		return "", fmt.Errorf("kafkazk: %s holds %q", ClusterIDPath, data)
	}
	return raw.ID, nil
}

// Reassignment is one partition's target replicas in
// /admin/reassign_partitions.
type Reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// EncodeReassignments returns /admin/reassign_partitions's JSON.
//
//	{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,3]}]}
func EncodeReassignments(rs []Reassignment) []byte {
	if rs == nil {
		rs = []Reassignment{}
	}
	return object(field{"version", 1}, field{"partitions", rs})
}

// DecodeReassignments reads /admin/reassign_partitions.
func DecodeReassignments(data []byte) ([]Reassignment, error) {
	var raw struct {
		Partitions []Reassignment `json:"partitions"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("kafkazk: %s holds %q: %w", ReassignPartitionsPath, data, err)
	}
	return raw.Partitions, nil
}
