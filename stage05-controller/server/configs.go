package server

import (
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// configWatcher keeps this broker's topic configs as ZooKeeper holds
// them (Kafka's DynamicConfigManager for topics): all of /config/topics at
// start, then the topic named by each new /config/changes notification,
// so that a topic's min.insync.replicas or unclean.leader.election.enable
// set with an admin tool applies on every broker.
type configWatcher struct {
	s *Server

	mu   sync.Mutex
	last string        // the newest notification applied. Protected by mu.
	done chan struct{} // closed by stop
	wg   sync.WaitGroup
}

// start loads every topic's config and begins watching for changes.
func (w *configWatcher) start() error {
	w.done = make(chan struct{})
	topics, err := w.s.ZK.Topics()
	if err != nil {
		return err
	}
	names, ch, err := w.s.ZK.ConfigChangesW()
	if err != nil {
		return err
	}
	for _, t := range topics {
		w.apply(t)
	}
	if len(names) > 0 {
		w.last = names[len(names)-1] // what came before was read above
	}
	w.wait(ch)
	return nil
}

// wait handles the next change when ch fires.
func (w *configWatcher) wait(ch <-chan zk.Event) {
	w.wg.Go(func() {
		select {
		case <-w.done:
		case <-ch:
			w.changed()
		}
	})
}

// changed applies the notifications newer than the last applied.
func (w *configWatcher) changed() {
	names, ch, err := w.s.ZK.ConfigChangesW()
	if err != nil {
		w.s.logger.Warn("reading /config/changes", "err", err)
		return
	}
	w.mu.Lock()
	var fresh []string
	for _, n := range names {
		if n > w.last {
			fresh = append(fresh, n)
		}
	}
	if len(fresh) > 0 {
		w.last = fresh[len(fresh)-1]
	}
	w.mu.Unlock()
	for _, n := range fresh {
		data, _, err := w.s.ZK.Conn().Get(kafkazk.ConfigChangesPath + "/" + n)
		if err != nil {
			continue
		}
		entity, err := kafkazk.DecodeConfigChange(data)
		if err != nil {
			w.s.logger.Warn("ignoring a config change notification", "name", n, "err", err)
			continue
		}
		if topic, ok := strings.CutPrefix(entity, "topics/"); ok {
			w.apply(topic)
		}
	}
	w.wait(ch)
}

// apply reads a topic's config and sets it on this broker.
func (w *configWatcher) apply(topic string) {
	config, err := w.s.ZK.TopicConfig(topic)
	if err != nil {
		w.s.logger.Warn("reading a topic config", "topic", topic, "err", err)
		return
	}
	if err := w.s.SetTopicConfig(topic, config); err != nil {
		w.s.logger.Warn("a topic config this broker cannot apply", "topic", topic, "config", config, "err", err)
	}
}

func (w *configWatcher) stop() {
	if w.done != nil {
		close(w.done)
		w.wg.Wait()
	}
}
