package kafkazk

import (
	"strconv"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// Kafka's znodes (ZkData.scala), as a Kafka 2.8 cluster lays them out.
// The partition state's and the ISR change notification's paths and JSON
// are stage 04's (package isr), the producer id block's too (package
// producer): this package uses theirs and defines the rest.
const (
	ClusterIDPath       = "/cluster/id"
	ControllerPath      = "/controller"
	ControllerEpochPath = "/controller_epoch"

	BrokersPath   = "/brokers"
	BrokerIDsPath = "/brokers/ids"
	TopicsPath    = "/brokers/topics"
	SeqIDPath     = "/brokers/seqid"

	IsrChangeNotificationPath = isr.IsrChangeNotificationPath
	isrChangePrefix           = isr.IsrChangeNotificationPrefix

	AdminPath              = "/admin"
	DeleteTopicsPath       = "/admin/delete_topics"
	ReassignPartitionsPath = "/admin/reassign_partitions"
	PreferredElectionPath  = "/admin/preferred_replica_election"

	ConfigPath         = "/config"
	ConfigTopicsPath   = "/config/topics"
	ConfigBrokersPath  = "/config/brokers"
	ConfigChangesPath  = "/config/changes"
	configChangePrefix = ConfigChangesPath + "/config_change_"

	LogDirEventNotificationPath = "/log_dir_event_notification"
	ProducerIDBlockPath         = producer.BlockPath
)

// PersistentPaths are the znodes every broker makes sure exist at start,
// in Kafka 2.8's order (ZkData.PersistentZkPaths, then one per config
// entity type).
var PersistentPaths = []string{
	ConsumersPath,
	BrokerIDsPath,
	TopicsPath,
	ConfigChangesPath,
	DeleteTopicsPath,
	SeqIDPath,
	IsrChangeNotificationPath,
	ProducerIDBlockPath,
	LogDirEventNotificationPath,
	ConfigTopicsPath,
	"/config/clients",
	"/config/users",
	ConfigBrokersPath,
	"/config/ips",
}

// ConsumersPath is the pre-0.9 consumers' znode; Kafka still creates it.
const ConsumersPath = "/consumers"

// BrokerPath is broker id's registration.
func BrokerPath(id int32) string { return BrokerIDsPath + "/" + strconv.Itoa(int(id)) }

// TopicPath holds a topic's assignment.
func TopicPath(topic string) string { return TopicsPath + "/" + topic }

// TopicPartitionsPath holds a topic's partitions.
func TopicPartitionsPath(topic string) string { return TopicPath(topic) + "/partitions" }

// TopicPartitionPath holds one partition's state znode.
func TopicPartitionPath(tp commitlog.TopicPartition) string {
	return TopicPartitionsPath(tp.Topic) + "/" + strconv.Itoa(int(tp.Partition))
}

// PartitionStatePath is a partition's state znode (stage 04's isr.StatePath).
func PartitionStatePath(tp commitlog.TopicPartition) string { return isr.StatePath(tp) }

// DeleteTopicPath marks a topic for deletion.
func DeleteTopicPath(topic string) string { return DeleteTopicsPath + "/" + topic }

// ConfigTopicPath holds a topic's config overrides.
func ConfigTopicPath(topic string) string { return ConfigTopicsPath + "/" + topic }

// ConfigBrokerPath holds a broker's dynamic config ("1"), or with
// ConfigBrokerDefault the cluster-wide one.
func ConfigBrokerPath(broker string) string { return ConfigBrokersPath + "/" + broker }
