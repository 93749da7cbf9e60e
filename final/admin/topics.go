package admin

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicsUsage = `admin topics: list, describe, create, delete topics and add partitions
(Kafka's kafka-topics.sh, with the same flags and output)

Usage:
  admin topics --bootstrap-server host:port --list [--exclude-internal]
  admin topics --bootstrap-server host:port --describe [--topic name] [--exclude-internal]
               [--under-replicated-partitions | --unavailable-partitions]
  admin topics --bootstrap-server host:port --create --topic name
               [--partitions n] [--replication-factor r] [--config key=value]... [--if-not-exists]
  admin topics --bootstrap-server host:port --delete --topic name [--if-exists]
  admin topics --bootstrap-server host:port --alter --topic name --partitions n [--if-exists]

Actions (exactly one):
  --list       print every topic's name, one a line
  --describe   print each topic (all, or --topic's) as kafka-topics --describe does:
                 Topic: orders	TopicId: ...	PartitionCount: 3	ReplicationFactor: 2	Configs: min.insync.replicas=2
                 	Topic: orders	Partition: 0	Leader: 1	Replicas: 1,2	Isr: 1,2
               Configs lists the topic's settings that are not Kafka's defaults;
               Leader is "none" when the partition has none.
  --create     create --topic (CreateTopics); prints "Created topic <name>."
  --delete     delete --topic and all its data (DeleteTopics)
  --alter      raise --topic's partition count to --partitions (CreatePartitions);
               Kafka never removes partitions, so n must be larger than the count

Options:
  --topic name                the topic to act on
  --partitions n              partitions of a new topic (default: the broker's num.partitions),
                              or the new total for --alter
  --replication-factor r      replicas of each partition of a new topic
                              (default: the broker's default.replication.factor)
  --config key=value          a topic config for --create (cleanup.policy, retention.ms,
                              min.insync.replicas, ...); repeat for several
  --if-not-exists             --create succeeds quietly if the topic exists
  --if-exists                 --delete and --alter succeed quietly if the topic does not exist
  --exclude-internal          leave out internal topics (__consumer_offsets)
  --under-replicated-partitions
                              --describe prints only the partitions whose ISR is
                              smaller than their replicas, and no topic lines:
                              nothing at all when every replica is in sync
  --unavailable-partitions    --describe prints only the partitions without a leader
  --bootstrap-server, --command-config, --timeout: see 'admin help'

Examples:
  admin topics --bootstrap-server localhost:9092 --create --topic orders \
      --partitions 3 --replication-factor 3 --config min.insync.replicas=2
  admin topics --bootstrap-server localhost:9092 --describe --topic orders
  admin topics --bootstrap-server localhost:9092 --alter --topic orders --partitions 6
  admin topics --bootstrap-server localhost:9092 --delete --topic orders
`

// topicsFlags are the flags of admin topics.
type topicsFlags struct {
	conn                                   connFlags
	list, describe, create, del, alter     bool
	topic                                  string
	partitions                             int
	replicationFactor                      int
	configs                                keyValues
	ifExists, ifNotExists, excludeInternal bool
	// underReplicated and unavailable narrow --describe to the partitions
	// in trouble, as kafka-topics' flags of the same names do.
	underReplicated, unavailable bool
}

func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f topicsFlags
	fs := newFlagSet("topics")
	f.conn.register(fs)
	actions := map[string]*bool{"list": &f.list, "describe": &f.describe, "create": &f.create, "delete": &f.del, "alter": &f.alter}
	boolFlags(fs, actions)
	boolFlags(fs, map[string]*bool{"if-exists": &f.ifExists, "if-not-exists": &f.ifNotExists, "exclude-internal": &f.excludeInternal,
		"under-replicated-partitions": &f.underReplicated, "unavailable-partitions": &f.unavailable})
	fs.StringVar(&f.topic, "topic", "", "")
	fs.IntVar(&f.partitions, "partitions", -1, "")
	fs.IntVar(&f.replicationFactor, "replication-factor", -1, "")
	fs.Var(&f.configs, "config", "")
	action, set, err := parseAction(fs, args, actions)
	if err != nil {
		return err
	}
	switch {
	case (f.create || f.del || f.alter) && f.topic == "":
		return usagef("%s needs --topic", action)
	case f.alter && !set["partitions"]:
		return usagef("--alter needs --partitions (the new partition count)")
	case set["partitions"] && !f.create && !f.alter:
		return usagef("--partitions goes with --create or --alter")
	case set["replication-factor"] && !f.create:
		return usagef("--replication-factor goes with --create")
	case len(f.configs) > 0 && !f.create:
		return usagef("--config goes with --create (change a topic's configs with admin configs --alter)")
	case f.list && f.topic != "":
		return usagef("--list takes no --topic")
	case (f.underReplicated || f.unavailable) && !f.describe:
		return usagef("--under-replicated-partitions and --unavailable-partitions go with --describe")
	case f.underReplicated && f.unavailable:
		return usagef("give --under-replicated-partitions or --unavailable-partitions, not both")
	}

	s, ctx, err := f.conn.connect(ctx, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	switch {
	case f.list:
		return s.listTopics(ctx, f.excludeInternal)
	case f.describe:
		return s.describeTopics(ctx, f)
	case f.create:
		return s.createTopic(ctx, f)
	case f.del:
		return s.deleteTopic(ctx, f.topic, f.ifExists)
	default:
		return s.alterPartitions(ctx, f.topic, f.partitions, f.ifExists)
	}
}

func (s *session) listTopics(ctx context.Context, excludeInternal bool) error {
	topics, err := s.adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return reach(err)
	}
	for _, t := range topics.Sorted() {
		if excludeInternal && t.IsInternal {
			continue
		}
		fmt.Fprintln(s.out, t.Topic)
	}
	return nil
}

func (s *session) describeTopics(ctx context.Context, f topicsFlags) error {
	topic, excludeInternal := f.topic, f.excludeInternal
	var names []string
	if topic != "" {
		names = []string{topic}
	}
	topics, err := s.adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return reach(err)
	}
	if topic != "" && !topics.Has(topic) {
		return kafkaError("topic", topic, "describe", kerr.UnknownTopicOrPartition, "")
	}
	var list []kadm.TopicDetail
	for _, t := range topics.Sorted() {
		if excludeInternal && t.IsInternal {
			continue
		}
		if t.Err != nil {
			return kafkaError("topic", t.Topic, "describe", t.Err, "")
		}
		list = append(list, t)
	}
	if f.underReplicated || f.unavailable {
		// kafka-topics prints only the partition lines then, so that an
		// empty output means nothing is wrong.
		for _, t := range list {
			for _, p := range t.Partitions.Sorted() {
				if f.underReplicated && len(p.ISR) < len(p.Replicas) || f.unavailable && p.Leader < 0 {
					s.printPartition(t.Topic, p)
				}
			}
		}
		return nil
	}
	configs, err := s.topicConfigs(ctx, list)
	if err != nil {
		return err
	}
	for _, t := range list {
		parts := t.Partitions.Sorted()
		fmt.Fprintf(s.out, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			t.Topic, topicID(t.ID), len(parts), t.Partitions.NumReplicas(), configs[t.Topic])
		for _, p := range parts {
			s.printPartition(t.Topic, p)
		}
	}
	return nil
}

// printPartition prints a partition's line of --describe.
func (s *session) printPartition(topic string, p kadm.PartitionDetail) {
	leader := "none"
	if p.Leader >= 0 {
		leader = fmt.Sprint(p.Leader)
	}
	fmt.Fprintf(s.out, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s",
		topic, p.Partition, leader, joinIDs(p.Replicas), joinIDs(p.ISR))
	if len(p.OfflineReplicas) > 0 {
		fmt.Fprintf(s.out, "\tOffline: %s", joinIDs(p.OfflineReplicas))
	}
	fmt.Fprintln(s.out)
}

// topicConfigs returns each topic's "Configs:" text: the entries whose
// source is not Kafka's default, as key=value joined by commas. Brokers
// that do not serve DescribeConfigs get a note on stderr and empty
// texts, so --describe still shows partitions and leaders.
func (s *session) topicConfigs(ctx context.Context, topics []kadm.TopicDetail) (map[string]string, error) {
	texts := map[string]string{}
	if len(topics) == 0 {
		return texts, nil
	}
	if ok, err := s.serves(ctx, 32); err != nil {
		return nil, err
	} else if !ok {
		fmt.Fprintln(s.errOut, "WARN: these brokers do not serve DescribeConfigs (API key 32): Configs is left empty.")
		return texts, nil
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Topic
	}
	rcs, err := s.adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, reach(err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, kafkaError("topic", rc.Name, "describe the configs of", rc.Err, rc.ErrMessage)
		}
		var kv []string
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDefaultConfig {
				continue
			}
			kv = append(kv, c.Key+"="+configValue(c))
		}
		sort.Strings(kv)
		texts[rc.Name] = strings.Join(kv, ",")
	}
	return texts, nil
}

func (s *session) createTopic(ctx context.Context, f topicsFlags) error {
	configs := map[string]*string{}
	for _, kv := range f.configs {
		v := kv.value
		configs[kv.key] = &v
	}
	// CreateTopic and DeleteTopic return the topic's own error as err
	// too; the answer's Err is the one to word.
	res, err := s.adm.CreateTopic(ctx, int32(f.partitions), int16(f.replicationFactor), configs, f.topic)
	if err != nil && res.Err == nil {
		return reach(err)
	}
	if res.Err != nil {
		if f.ifNotExists && res.Err == kerr.TopicAlreadyExists {
			return nil
		}
		return kafkaError("topic", f.topic, "create", res.Err, res.ErrMessage)
	}
	fmt.Fprintf(s.out, "Created topic %s.\n", f.topic)
	return nil
}

func (s *session) deleteTopic(ctx context.Context, topic string, ifExists bool) error {
	res, err := s.adm.DeleteTopic(ctx, topic)
	if err != nil && res.Err == nil {
		return reach(err)
	}
	if res.Err != nil {
		if ifExists && res.Err == kerr.UnknownTopicOrPartition {
			return nil
		}
		return kafkaError("topic", topic, "delete", res.Err, res.ErrMessage)
	}
	fmt.Fprintf(s.out, "Deleted topic %s.\n", topic)
	return nil
}

func (s *session) alterPartitions(ctx context.Context, topic string, partitions int, ifExists bool) error {
	if err := s.require(ctx, 37, "--alter --partitions"); err != nil {
		return err
	}
	res, err := s.adm.UpdatePartitions(ctx, partitions, topic)
	if err != nil {
		return reach(err)
	}
	r := res[topic]
	if r.Err != nil {
		if ifExists && r.Err == kerr.UnknownTopicOrPartition {
			return nil
		}
		return kafkaError("topic", topic, "add partitions to", r.Err, r.ErrMessage)
	}
	fmt.Fprintf(s.out, "Topic %s now has %d partitions.\n", topic, partitions)
	return nil
}

// topicID prints a topic ID as Kafka's Uuid.toString does: URL-safe
// base64 without padding (kadm's String uses the standard alphabet).
func topicID(id kadm.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// joinIDs prints broker ids as Kafka's tools do: 1,2,3.
func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// configValue prints a config's value; a sensitive one is hidden, as
// Kafka's tools print it.
func configValue(c kadm.Config) string {
	if c.Sensitive || c.Value == nil {
		return "null"
	}
	return *c.Value
}
