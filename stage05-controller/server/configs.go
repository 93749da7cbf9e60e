package server

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	s4 "github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// configWatcher keeps this broker's topic configs as ZooKeeper holds
// them (Kafka's DynamicConfigManager for topics): all of /config/topics at
// start, then the topic named by each new /config/changes notification
// (kafkazk's ConfigChangeListener), so that a topic's min.insync.replicas,
// cleanup.policy or retention.ms set with an admin tool applies on every
// broker. A topic new to this broker has its config read before its first
// log is created (LeaderAndIsr), as Kafka's LogManager reads it when it
// creates a log: a topic's creation writes no notification.
type configWatcher struct {
	s        *Server
	listener *kafkazk.ConfigChangeListener
}

// start begins listening for changes, then loads every topic's config: a
// change made in between is applied by both, the later read wins.
func (w *configWatcher) start() error {
	l, err := w.s.ZK.ListenConfigChanges(w.changed)
	if err != nil {
		return err
	}
	w.listener = l
	topics, err := w.s.ZK.Topics()
	if err != nil {
		return err
	}
	for _, t := range topics {
		w.apply(t)
	}
	return nil
}

// changed applies a notification's entity if it is a topic.
func (w *configWatcher) changed(entity string) {
	if topic, ok := strings.CutPrefix(entity, "topics/"); ok {
		w.apply(topic)
	}
}

// apply reads a topic's config and sets it on this broker: the ISR keys
// on stage 04's topic configs, the log keys on the store, which hands them
// to the topic's logs.
func (w *configWatcher) apply(topic string) {
	config, err := w.s.ZK.TopicConfig(topic)
	if err != nil {
		w.s.logger.Warn("reading a topic config", "topic", topic, "err", err)
		return
	}
	isrKeys, logKeys := splitTopicConfig(config)
	if err := w.s.SetTopicConfig(topic, isrKeys); err != nil {
		w.s.logger.Warn("a topic config this broker cannot apply", "topic", topic, "config", config, "err", err)
	}
	if len(logKeys) == 0 && len(w.s.Store().TopicConfigs(topic)) == 0 {
		return
	}
	if err := w.s.Store().SetTopicConfigs(topic, logKeys); err != nil {
		w.s.logger.Warn("a topic config this broker cannot apply", "topic", topic, "config", config, "err", err)
	}
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
			w.apply(t)
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
