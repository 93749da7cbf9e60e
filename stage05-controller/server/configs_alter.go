package server

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// configAPIs are DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.
func (s *Server) configAPIs() []broker.API {
	return []broker.API{s.describeConfigsAPI(), s.alterConfigsAPI(), s.incrementalAlterConfigsAPI()}
}

// AlterConfigs (key 33), v0-v2: replaces a topic's or a broker's whole
// dynamic config (keys left out are removed), as Kafka's ZkAdminManager
// does. Any broker writes a topic's /config/topics/<topic>; a broker's
// config is written by that broker (another answers INVALID_REQUEST),
// the cluster-wide one ("") by any. Each write adds a
// /config/changes/config_change_<seq> notification, which every broker's
// configWatcher follows: the change applies everywhere without a restart.
func (s *Server) alterConfigsAPI() broker.API {
	return broker.API{Key: 33, MinVersion: 0, MaxVersion: 2, Handle: s.handleAlterConfigs}
}

// IncrementalAlterConfigs (key 44), v0-v1 (KIP-339): changes some keys of
// a config and keeps the rest: SET, DELETE, and for list keys
// (cleanup.policy) APPEND and SUBTRACT of list items.
func (s *Server) incrementalAlterConfigsAPI() broker.API {
	return broker.API{Key: 44, MinVersion: 0, MaxVersion: 1, Handle: s.handleIncrementalAlterConfigs}
}

// A configOp is one change of an alter request: Kafka's AlterConfigOp.
type configOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// An alterError is an answer's error code and message.
type alterError struct {
	code int16
	msg  string
}

func (e *alterError) Error() string { return e.msg }

func invalidRequest(format string, args ...any) error {
	return &alterError{kerr.InvalidRequest.Code, fmt.Sprintf(format, args...)}
}

func (s *Server) handleAlterConfigs(r *broker.Request) {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resources := make([]resourceOps, len(req.Resources))
	for i, res := range req.Resources {
		resources[i] = resourceOps{typ: res.ResourceType, name: res.ResourceName}
		for _, c := range res.Configs {
			resources[i].ops = append(resources[i].ops, configOp{c.Name, kmsg.IncrementalAlterConfigOpSet, c.Value})
		}
	}
	resp := kmsg.NewPtrAlterConfigsResponse()
	for i, err := range s.alterResources(resources, true, req.ValidateOnly) {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = resources[i].typ, resources[i].name
		out.ErrorCode, out.ErrorMessage = errorAnswer(err)
		resp.Resources = append(resp.Resources, out)
	}
	r.Respond(resp)
}

func (s *Server) handleIncrementalAlterConfigs(r *broker.Request) {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resources := make([]resourceOps, len(req.Resources))
	for i, res := range req.Resources {
		resources[i] = resourceOps{typ: res.ResourceType, name: res.ResourceName}
		for _, c := range res.Configs {
			resources[i].ops = append(resources[i].ops, configOp{c.Name, c.Op, c.Value})
		}
	}
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for i, err := range s.alterResources(resources, false, req.ValidateOnly) {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = resources[i].typ, resources[i].name
		out.ErrorCode, out.ErrorMessage = errorAnswer(err)
		resp.Resources = append(resp.Resources, out)
	}
	r.Respond(resp)
}

// resourceOps is one resource of an alter request and its changes: the
// form both AlterConfigs and IncrementalAlterConfigs are applied in.
type resourceOps struct {
	typ  kmsg.ConfigResourceType
	name string
	ops  []configOp
}

// alterResources applies each resource's changes (replace: AlterConfigs'
// whole config, see alterResource) and returns each one's error. A
// resource named more than once in a request, which Kafka refuses, is
// refused in every copy and none of them is applied.
func (s *Server) alterResources(resources []resourceOps, replace, validateOnly bool) []error {
	type id struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := map[id]int{}
	for _, res := range resources {
		count[id{res.typ, res.name}]++
	}
	errs := make([]error, len(resources))
	for i, res := range resources {
		if count[id{res.typ, res.name}] > 1 {
			errs[i] = invalidRequest("Each resource must appear at most once.")
			continue
		}
		errs[i] = s.alterResource(res.typ, res.name, res.ops, replace, validateOnly)
	}
	return errs
}

// errorAnswer is the code and message of an answer.
func errorAnswer(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	var ae *alterError
	if errors.As(err, &ae) {
		return ae.code, &msg
	}
	return kerr.UnknownServerError.Code, &msg
}

// alterResource applies ops to one resource: replace (AlterConfigs)
// starts from an empty config, else from the one in ZooKeeper.
func (s *Server) alterResource(typ kmsg.ConfigResourceType, name string, ops []configOp, replace, validateOnly bool) error {
	names := map[string]bool{}
	var nulls []string
	for _, o := range ops {
		if names[o.name] {
			return invalidRequest("Error due to duplicate config keys")
		}
		names[o.name] = true
		if o.value == nil && o.op != kmsg.IncrementalAlterConfigOpDelete {
			nulls = append(nulls, o.name)
		}
		if o.op < kmsg.IncrementalAlterConfigOpSet || o.op > kmsg.IncrementalAlterConfigOpSubtract {
			return invalidRequest("Unknown operations type %d", o.op)
		}
	}
	if len(nulls) > 0 {
		return invalidRequest("Null value not supported for : %s", strings.Join(nulls, ", "))
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return s.alterTopicConfig(name, ops, replace, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		return s.alterBrokerConfig(name, ops, replace, validateOnly)
	default:
		return invalidRequest("Unknown resource type %d", int8(typ))
	}
}

// resourceString is Kafka's ConfigResource.toString, which its messages
// quote.
func resourceString(typ kmsg.ConfigResourceType, name string) string {
	return fmt.Sprintf("ConfigResource(type=%s, name='%s')", strings.ToUpper(typ.String()), name)
}

func (s *Server) alterTopicConfig(topic string, ops []configOp, replace, validateOnly bool) error {
	if topic == "" {
		return invalidRequest("Default topic resources are not allowed.")
	}
	exists, err := s.ZK.TopicExists(topic)
	if err != nil {
		return err
	}
	if !exists {
		return &alterError{kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("The topic '%s' does not exist.", topic)}
	}
	config := map[string]string{}
	if !replace {
		if config, err = s.ZK.TopicConfig(topic); err != nil {
			return err
		}
	}
	invalid := func(err error) error {
		return &alterError{kerr.InvalidConfig.Code, fmt.Sprintf("Invalid config value for resource %s: %v",
			resourceString(kmsg.ConfigResourceTypeTopic, topic), err)}
	}
	if err := applyOps(config, ops, func(name string) (string, bool) {
		k, ok := lookupTopicKey(name)
		return k.def, ok && k.typ == typList
	}); err != nil {
		return invalid(err)
	}
	if err := s.validateTopicConfig(config); err != nil {
		return invalid(err)
	}
	if validateOnly {
		return nil
	}
	if err := s.ZK.SetTopicConfig(topic, config); err != nil {
		return err
	}
	s.logger.Info("topic config changed", "topic", topic, "config", config)
	return nil
}

func (s *Server) alterBrokerConfig(name string, ops []configOp, replace, validateOnly bool) error {
	entity := kafkazk.ConfigBrokerDefault
	if name != "" {
		id, err := strconv.Atoi(name)
		if err != nil {
			return invalidRequest("Node id must be an integer, but it is: %s", name)
		}
		if int32(id) != s.ID() {
			return invalidRequest("Unexpected broker id, expected %d, but received %s", s.ID(), name)
		}
		entity = name
	}
	config := map[string]string{}
	if !replace {
		var err error
		if config, err = s.ZK.BrokerConfig(entity); err != nil {
			return err
		}
	}
	if err := applyOps(config, ops, func(name string) (string, bool) {
		k, b, ok := synonymGroup(name)
		return b.def, ok && k.typ == typList
	}); err != nil {
		return invalidRequest("%v", err)
	}
	// Kafka validates a broker config before it reaches the admin
	// manager and answers INVALID_REQUEST (ConfigAdminManager.preprocess).
	if err := s.validateBrokerConfig(config); err != nil {
		return invalidRequest("%v", err)
	}
	if validateOnly {
		return nil
	}
	if err := s.ZK.SetBrokerConfig(entity, config); err != nil {
		return err
	}
	s.logger.Info("dynamic broker config changed", "entity", entity, "config", config)
	return nil
}

// applyOps changes config by ops, as Kafka's prepareIncrementalConfigs:
// APPEND adds the items not yet in the list, SUBTRACT removes items, both
// starting from the key's default (listDefault) when the config has no
// value; only list keys take them.
func applyOps(config map[string]string, ops []configOp, listDefault func(name string) (string, bool)) error {
	for _, o := range ops {
		switch o.op {
		case kmsg.IncrementalAlterConfigOpSet:
			config[o.name] = *o.value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(config, o.name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			def, isList := listDefault(o.name)
			if !isList {
				verb := "append"
				if o.op == kmsg.IncrementalAlterConfigOpSubtract {
					verb = "subtract"
				}
				return fmt.Errorf("Config value %s is not allowed for config key: %s", verb, o.name)
			}
			old, ok := config[o.name]
			if !ok {
				old = def
			}
			items := slices.DeleteFunc(strings.Split(old, ","), func(s string) bool { return s == "" })
			for _, v := range strings.Split(*o.value, ",") {
				if o.op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(items, v) {
					items = append(items, v)
				}
				if o.op == kmsg.IncrementalAlterConfigOpSubtract {
					items = slices.DeleteFunc(items, func(s string) bool { return s == v })
				}
			}
			config[o.name] = strings.Join(items, ",")
		}
	}
	return nil
}
