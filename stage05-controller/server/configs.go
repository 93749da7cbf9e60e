package server

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	s4 "github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// configWatcher keeps this broker's topic configs as ZooKeeper holds
// them (Kafka's DynamicConfigManager for topics and brokers): all of
// /config/topics and this broker's /config/brokers entries at start, then
// the entity named by each new /config/changes notification, so that a
// topic's min.insync.replicas, cleanup.policy or retention.ms set with an
// admin tool applies on every broker. A topic new to this broker has its
// config read before its first log is created (LeaderAndIsr), as Kafka's
// LogManager reads it when it creates a log: a topic's creation writes no
// notification. A dynamic broker config (log.retention.ms for every
// topic without its own retention.ms) is applied as each such topic's
// effective config, so it too takes effect at once.
type configWatcher struct {
	s *Server

	// applying orders apply's read of ZooKeeper and write of the config:
	// a notification's apply and a LeaderAndIsr's for the same topic must
	// not interleave, or the older read could land last.
	applying sync.Mutex

	mu sync.Mutex
	// broker and cluster are the dynamic broker configs:
	// /config/brokers/<id> and /config/brokers/<default>. Protected by mu.
	broker, cluster map[string]string
	// listener hands on each new /config/changes notification (Kafka's
	// ZkNodeChangeNotificationListener); nil until start.
	listener *kafkazk.ConfigChangeListener
}

// dynamic returns the dynamic broker configs, per broker and cluster-wide.
func (w *configWatcher) dynamic() (broker, cluster map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.broker, w.cluster
}

// loadBrokerConfigs reads this broker's dynamic broker configs.
func (w *configWatcher) loadBrokerConfigs() error {
	broker, err := w.s.ZK.BrokerConfig(strconv.Itoa(int(w.s.ID())))
	if err != nil {
		return err
	}
	cluster, err := w.s.ZK.BrokerConfig(kafkazk.ConfigBrokerDefault)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.broker, w.cluster = broker, cluster
	w.mu.Unlock()
	return nil
}

// start begins following /config/changes, then loads the dynamic broker
// configs and every topic's config: a change made in between is read
// twice, which does no harm (a notification names an entity, whose znode
// holds its whole config).
func (w *configWatcher) start() error {
	l, err := w.s.ZK.ListenConfigChanges(w.changed)
	if err != nil {
		return err
	}
	w.listener = l
	if err := w.loadBrokerConfigs(); err != nil {
		return err
	}
	topics, err := w.s.ZK.Topics()
	if err != nil {
		return err
	}
	for _, t := range topics {
		if err := w.apply(t); err != nil {
			return err
		}
	}
	return nil
}

// changed applies the entity a notification names: a topic, or this
// broker's or every broker's dynamic config (users are final's SASL's).
// An error (ZooKeeper could not be read) makes the listener try the
// notification again.
func (w *configWatcher) changed(entity string) error {
	if topic, ok := strings.CutPrefix(entity, kafkazk.ConfigEntityTopics+"/"); ok {
		return w.apply(topic)
	}
	if b, ok := strings.CutPrefix(entity, kafkazk.ConfigEntityBrokers+"/"); ok &&
		(b == kafkazk.ConfigBrokerDefault || b == strconv.Itoa(int(w.s.ID()))) {
		return w.brokerConfigChanged()
	}
	return nil
}

// brokerConfigChanged reads the dynamic broker configs again and applies
// every topic's config with them.
func (w *configWatcher) brokerConfigChanged() error {
	if err := w.loadBrokerConfigs(); err != nil {
		return fmt.Errorf("reading the dynamic broker configs: %w", err)
	}
	topics, err := w.s.ZK.Topics()
	if err != nil {
		return fmt.Errorf("listing topics for a dynamic broker config: %w", err)
	}
	for _, t := range topics {
		if err := w.apply(t); err != nil {
			return err
		}
	}
	return nil
}

// apply reads a topic's config and sets it on this broker: the ISR keys
// on stage 04's topic configs, the log keys on the store, which hands them
// to the topic's logs. The keys the topic does not set and a dynamic
// broker config does are set too: the static broker config stays the
// store's default. Only a failed read of ZooKeeper is an error; a config
// this broker cannot apply is logged (it will not apply on a retry
// either).
func (w *configWatcher) apply(topic string) error {
	w.applying.Lock()
	defer w.applying.Unlock()
	own, err := w.s.ZK.TopicConfig(topic)
	if err != nil {
		return fmt.Errorf("reading the config of topic %s: %w", topic, err)
	}
	config := maps.Clone(own)
	for _, v := range w.s.topicConfigValues(own) {
		if k, _ := lookupTopicKey(v.name); k.live &&
			(v.source == kmsg.ConfigSourceDynamicBrokerConfig || v.source == kmsg.ConfigSourceDynamicDefaultBrokerConfig) {
			config[v.name] = v.value
		}
	}
	isrKeys, logKeys := splitTopicConfig(config)
	if err := w.s.SetTopicConfig(topic, isrKeys); err != nil {
		w.s.logger.Warn("a topic config this broker cannot apply", "topic", topic, "config", config, "err", err)
	}
	if len(logKeys) == 0 && len(w.s.Store().TopicConfigs(topic)) == 0 {
		return nil
	}
	if err := w.s.Store().SetTopicConfigs(topic, logKeys); err != nil {
		w.s.logger.Warn("a topic config this broker cannot apply", "topic", topic, "config", config, "err", err)
	}
	return nil
}

// splitTopicConfig splits a topic's config into the keys of stage 04's
// topic configs (the ISR's) and those of its logs (stage 01's); the rest
// (compression.type, ...) are kept in ZooKeeper for later stages.
func splitTopicConfig(config map[string]string) (isrKeys, logKeys map[string]string) {
	isrKeys, logKeys = map[string]string{}, map[string]string{}
	for k, v := range config {
		switch {
		case k == s4.KeyMinInsyncReplicas || k == s4.KeyUncleanLeaderElection:
			isrKeys[k] = v
		case slices.Contains(commitlog.TopicKeys(), k):
			logKeys[k] = v
		}
	}
	return isrKeys, logKeys
}

// beforeLeaderAndIsr reads the config of every topic of a LeaderAndIsr
// request that has no log here yet, before stage 03's handler creates
// the logs.
func (w *configWatcher) beforeLeaderAndIsr(req *kmsg.LeaderAndISRRequest) {
	var topics []string
	for _, t := range req.TopicStates {
		topics = append(topics, t.Topic)
	}
	for _, p := range req.PartitionStates { // v0-v1 list partitions, not topics
		topics = append(topics, p.Topic)
	}
	slices.Sort(topics)
	for _, t := range slices.Compact(topics) {
		if len(w.s.Store().TopicPartitions(t)) == 0 {
			if err := w.apply(t); err != nil {
				// The log is created with the broker's defaults; the
				// topic's own config arrives with the next notification
				// or LeaderAndIsr.
				w.s.logger.Warn("a new topic's config could not be read", "topic", t, "err", err)
			}
		}
	}
}

// wrapLeaderAndIsr registers stage 03's LeaderAndIsr handler again, with
// beforeLeaderAndIsr first.
func (w *configWatcher) wrapLeaderAndIsr() broker.API {
	i := slices.IndexFunc(w.s.APIs(), func(a broker.API) bool { return a.Key == 4 })
	api := w.s.APIs()[i]
	handle := api.Handle
	api.Handle = func(r *broker.Request) {
		w.beforeLeaderAndIsr(r.Body.(*kmsg.LeaderAndISRRequest))
		handle(r)
	}
	return api
}

func (w *configWatcher) stop() {
	if w.listener != nil {
		w.listener.Stop()
	}
}
