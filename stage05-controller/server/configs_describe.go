package server

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// DescribeConfigs (key 32), v0-v4, as a Kafka 3.9 broker in ZooKeeper
// mode serves it (Kafka's ConfigHelper): a topic's configs, or a
// broker's ("1": every key with its effective value; "": the cluster-wide
// dynamic configs only). Each config says where its value comes from
// (v1+: DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG; v0
// only is_default), and with include_synonyms every place that sets it,
// most important first: the topic's own value, then the broker keys in
// /config/brokers/<id>, /config/brokers/<default>, the properties file
// and Kafka's defaults. v3+ adds the type and documentation. BROKER_LOGGER
// (the log4j loggers) is not served: INVALID_REQUEST.
//
// The request is bounded as Metadata is: each resource costs its own
// topic and nothing more. Whether a topic exists comes from one listing of
// ZooKeeper for the whole request, and each existing topic's config is
// read once, concurrently with the others (topicLookup), so a request
// naming 100,000 topics that do not exist costs one ZooKeeper read, not
// 100,000. A resource named a second time is answered INVALID_REQUEST
// ("Duplicate resource in request.", what Kafka answers a topic listed
// twice in CreateTopics) rather than described again: otherwise a request
// of a few megabytes repeating one topic would make a response of
// gigabytes. Kafka's own DescribeConfigs describes repeats, and bounds
// the request only by socket.request.max.bytes; clients name each
// resource once.
func (s *Server) describeConfigsAPI() broker.API {
	return broker.API{Key: 32, MinVersion: 0, MaxVersion: 4, Handle: s.handleDescribeConfigs}
}

// A configValue is one place a config's value comes from: a synonym, and
// the head of the list the config's effective value.
type configValue struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// brokerSources are the broker-level sources, most important first:
// /config/brokers/<id>, /config/brokers/<default>, the properties,
// Kafka's defaults (def).
func (s *Server) brokerSources(def func(name string) (string, bool)) []func(string) (string, bool, kmsg.ConfigSource) {
	broker, cluster := s.config.dynamic()
	in := func(m map[string]string, src kmsg.ConfigSource) func(string) (string, bool, kmsg.ConfigSource) {
		return func(name string) (string, bool, kmsg.ConfigSource) { v, ok := m[name]; return v, ok, src }
	}
	return []func(string) (string, bool, kmsg.ConfigSource){
		in(broker, kmsg.ConfigSourceDynamicBrokerConfig),
		in(cluster, kmsg.ConfigSourceDynamicDefaultBrokerConfig),
		in(s.cfg.Props, kmsg.ConfigSourceStaticBrokerConfig),
		func(name string) (string, bool, kmsg.ConfigSource) {
			v, ok := def(name)
			return v, ok, kmsg.ConfigSourceDefaultConfig
		},
	}
}

// brokerDefault is Kafka's default of a broker key that sets a topic key.
func brokerDefault(name string) (string, bool) {
	_, b, ok := synonymGroup(name)
	return b.def, ok && b.def != ""
}

// synonyms lists the broker keys of one group (log.retention.ms,
// .minutes, .hours) that have a value, source by source, as Kafka's
// ConfigHelper.configSynonyms does.
func (s *Server) synonyms(group []brokerSynonym) []configValue {
	var out []configValue
	for _, source := range s.brokerSources(brokerDefault) {
		for _, b := range group {
			if v, ok, src := source(b.name); ok {
				out = append(out, configValue{b.name, v, src})
			}
		}
	}
	return out
}

// A topicConfigValue is a topic key's effective value and its synonyms.
type topicConfigValue struct {
	configValue
	synonyms []configValue
}

// topicConfigValues resolves every topic key of a topic whose own config
// is own: its value, in the topic key's unit, from the most important
// place that sets it.
func (s *Server) topicConfigValues(own map[string]string) []topicConfigValue {
	out := make([]topicConfigValue, 0, len(topicKeys))
	for _, k := range topicKeys {
		var syn []configValue
		if v, ok := own[k.name]; ok {
			syn = append(syn, configValue{k.name, v, kmsg.ConfigSourceDynamicTopicConfig})
		}
		syn = append(syn, s.synonyms(k.broker)...)
		v := topicConfigValue{configValue: configValue{k.name, k.def, kmsg.ConfigSourceDefaultConfig}, synonyms: syn}
		if len(syn) > 0 {
			v.source, v.value = syn[0].source, syn[0].value
			if i := slices.IndexFunc(k.broker, func(b brokerSynonym) bool { return b.name == syn[0].name }); i >= 0 {
				v.value = inMillis(k.broker[i], v.value)
			}
		}
		out = append(out, v)
	}
	return out
}

func (s *Server) handleDescribeConfigs(r *broker.Request) {
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.Resources = make([]kmsg.DescribeConfigsResponseResource, 0, len(req.Resources))
	topics := s.lookUpTopics(req.Resources)
	seen := make(map[describedResource]bool, len(req.Resources))
	for _, res := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = res.ResourceType, res.ResourceName
		key := describedResource{res.ResourceType, res.ResourceName}
		if seen[key] {
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Duplicate resource in request.")
			resp.Resources = append(resp.Resources, out)
			continue
		}
		seen[key] = true
		configs, code, msg := s.describeResource(res, topics)
		out.ErrorCode = code
		if msg != "" {
			out.ErrorMessage = &msg
		}
		var wanted map[string]bool
		if len(res.ConfigNames) > 0 {
			wanted = make(map[string]bool, len(res.ConfigNames))
			for _, n := range res.ConfigNames {
				wanted[n] = true
			}
		}
		for _, c := range configs {
			if wanted != nil && !wanted[c.Name] {
				continue
			}
			if !req.IncludeSynonyms {
				c.ConfigSynonyms = nil
			}
			if !req.IncludeDocumentation {
				c.Documentation = nil
			}
			c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig // v0's field
			out.Configs = append(out.Configs, c)
		}
		resp.Resources = append(resp.Resources, out)
	}
	r.Respond(resp)
}

// describedResource is a resource as a request names it: the same twice is
// answered once.
type describedResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// topicLookup is what one DescribeConfigs request needs from ZooKeeper:
// which topics exist, from one listing of /brokers/topics, and the config
// of each that exists and is asked for, read once however often it is
// named. A request naming 100,000 topics cost 100,000 ZooKeeper round
// trips when each was looked up on its own (10,000 took 5 s, 100,000 over
// a minute); now it costs one, plus one per existing topic, those read
// describeConcurrency at a time over the one session. Kafka's broker
// asks its metadata cache whether a topic exists and reads each one's
// config from ZooKeeper in turn (ConfigHelper.describeConfigs).
type topicLookup struct {
	err     error                        // the listing failed: every topic resource says so
	exists  map[string]bool              // the topics asked for that exist
	configs map[string]map[string]string // each existing topic's own config, /config/topics/<t>
	errs    map[string]error             // each existing topic whose config could not be read
}

// describeConcurrency is how many topic configs one request reads from
// ZooKeeper at a time: the session pipelines them, so the wait is about
// one round trip per describeConcurrency topics.
const describeConcurrency = 32

// legalTopicName is Kafka's rule for a topic's name (Topic.validate).
func legalTopicName(name string) bool {
	return len(name) > 0 && len(name) <= 249 && name != "." && name != ".." && legalTopic.MatchString(name)
}

// lookUpTopics reads what the request's topic resources need.
func (s *Server) lookUpTopics(resources []kmsg.DescribeConfigsRequestResource) topicLookup {
	asked := map[string]bool{}
	for _, res := range resources {
		if res.ResourceType == kmsg.ConfigResourceTypeTopic && legalTopicName(res.ResourceName) {
			asked[res.ResourceName] = true
		}
	}
	if len(asked) == 0 {
		return topicLookup{}
	}
	all, err := s.ZK.Topics()
	if err != nil {
		return topicLookup{err: err}
	}
	l := topicLookup{exists: map[string]bool{}, configs: map[string]map[string]string{}, errs: map[string]error{}}
	var existing []string
	for _, t := range all {
		if asked[t] {
			l.exists[t] = true
			existing = append(existing, t)
		}
	}
	configs := make([]map[string]string, len(existing))
	errs := make([]error, len(existing))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(describeConcurrency, len(existing)) {
		wg.Go(func() {
			for i := range next {
				configs[i], errs[i] = s.ZK.TopicConfig(existing[i])
			}
		})
	}
	for i := range existing {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, t := range existing {
		if errs[i] != nil {
			l.errs[t] = errs[i]
		} else {
			l.configs[t] = configs[i]
		}
	}
	return l
}

// describeResource answers one resource: its configs, or an error code
// and message. topics holds what the request's topic resources need.
func (s *Server) describeResource(res kmsg.DescribeConfigsRequestResource, topics topicLookup) ([]kmsg.DescribeConfigsResponseResourceConfig, int16, string) {
	switch res.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if !legalTopicName(res.ResourceName) {
			return nil, kerr.InvalidTopicException.Code, fmt.Sprintf("topic name %q is illegal: up to 249 of [a-zA-Z0-9._-], not . or ..", res.ResourceName)
		}
		if topics.err != nil {
			return nil, kerr.UnknownServerError.Code, topics.err.Error()
		}
		if !topics.exists[res.ResourceName] {
			return nil, kerr.UnknownTopicOrPartition.Code, ""
		}
		if err := topics.errs[res.ResourceName]; err != nil {
			return nil, kerr.UnknownServerError.Code, err.Error()
		}
		return s.describeTopic(topics.configs[res.ResourceName]), 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if res.ResourceName == "" {
			return s.describeBroker(true), 0, ""
		}
		id, err := strconv.Atoi(res.ResourceName)
		if err != nil {
			return nil, kerr.InvalidRequest.Code, "Broker id must be an integer, but it is: " + res.ResourceName
		}
		if int32(id) != s.ID() {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", s.ID(), res.ResourceName)
		}
		return s.describeBroker(false), 0, ""
	default:
		return nil, kerr.InvalidRequest.Code, fmt.Sprintf("Unsupported resource type: %s", res.ResourceType)
	}
}

// describeTopic lists every topic key with its value and synonyms.
func (s *Server) describeTopic(own map[string]string) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, v := range s.topicConfigValues(own) {
		k, _ := lookupTopicKey(v.name)
		c := configEntry(v.configValue, v.synonyms, k.typ, k.doc)
		out = append(out, c)
	}
	return out
}

// configEntry builds one answered config.
func configEntry(v configValue, synonyms []configValue, typ kmsg.ConfigType, doc string) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Source, c.ConfigType = v.name, v.source, typ
	value := v.value
	c.Value = &value
	if doc != "" {
		c.Documentation = &doc
	}
	c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
	for _, syn := range synonyms {
		sv := syn.value
		c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: syn.name, Value: &sv, Source: syn.source})
	}
	return c
}

// describeBroker lists this broker's configs: every key of the
// properties, every broker key that sets a topic key's default, the
// dynamic ones and those a later stage adds (Options.BrokerConfigs).
// clusterDefault lists only the cluster-wide dynamic configs, as Kafka
// answers the resource "".
func (s *Server) describeBroker(clusterDefault bool) []kmsg.DescribeConfigsResponseResourceConfig {
	broker, cluster := s.config.dynamic()
	names := map[string]bool{}
	for n := range cluster {
		names[n] = true
	}
	if !clusterDefault {
		for _, m := range []map[string]string{broker, s.cfg.Props} {
			for n := range m {
				names[n] = true
			}
		}
		for _, k := range topicKeys {
			for _, b := range k.broker {
				names[b.name] = true
			}
		}
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range slices.Sorted(maps.Keys(names)) {
		k, b, known := synonymGroup(name)
		group := []brokerSynonym{{name: name, unit: 1}}
		typ, doc := kmsg.ConfigTypeUnknown, ""
		if known {
			group, typ, doc = k.broker, brokerKeyType(k, b), fmt.Sprintf("the broker default of the topic config %s: %s", k.name, k.doc)
		}
		syn := s.synonyms(group)
		// Kafka drops the more precise keys before this one (describing
		// log.retention.hours does not list log.retention.ms).
		for len(syn) > 0 && syn[0].name != name {
			syn = syn[1:]
		}
		if clusterDefault {
			syn = slices.DeleteFunc(syn, func(v configValue) bool { return v.source != kmsg.ConfigSourceDynamicDefaultBrokerConfig })
		}
		if len(syn) == 0 {
			continue // no value anywhere: Kafka leaves out null keys
		}
		c := configEntry(syn[0], syn, typ, doc)
		c.ReadOnly = !dynamicBrokerKey(name)
		if sensitiveKey(name) {
			c.Value, c.IsSensitive, c.ConfigType = nil, true, kmsg.ConfigTypePassword
			for i := range c.ConfigSynonyms {
				c.ConfigSynonyms[i].Value = nil
			}
		}
		out = append(out, c)
	}
	if clusterDefault {
		return out
	}
	for _, e := range s.brokerConfigs {
		if slices.ContainsFunc(out, func(c kmsg.DescribeConfigsResponseResourceConfig) bool { return c.Name == e.Name }) {
			continue
		}
		v := configValue{e.Name, e.Value, kmsg.ConfigSourceStaticBrokerConfig}
		if e.Default {
			v.source = kmsg.ConfigSourceDefaultConfig
		}
		c := configEntry(v, []configValue{v}, e.Type, e.Doc)
		c.ReadOnly = true
		if e.Sensitive {
			c.Value, c.IsSensitive, c.ConfigType = nil, true, kmsg.ConfigTypePassword
			c.ConfigSynonyms[0].Value = nil
		}
		out = append(out, c)
	}
	return out
}
