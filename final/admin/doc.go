// Package admin is the workbook's admin command: kafka-topics.sh,
// kafka-consumer-groups.sh, kafka-configs.sh and kafka-reassign-partitions.sh
// in one binary, with
// franz-go's kadm underneath. Every subcommand speaks Kafka's admin
// protocol (CreateTopics, DescribeGroups, IncrementalAlterConfigs, ...)
// to any cluster that serves it, this workbook's brokers or Kafka's own,
// takes the flags Kafka's tools take, and prints what they print, so a
// Kafka user reads the output without learning a new tool:
//
//	admin topics --bootstrap-server localhost:9092 --describe --topic orders
//	Topic: orders	TopicId: 2l0Dg6GzQ8Gx3sD3G5dXkA	PartitionCount: 3	ReplicationFactor: 3	Configs: min.insync.replicas=2
//		Topic: orders	Partition: 0	Leader: 1	Replicas: 1,2,0	Isr: 1,2,0
//
// Run is the whole command; cmd/admin is its main. The tests drive Run
// against franz-go's kfake cluster (which serves every admin API) and
// against this workbook's brokers (which serve the subset a stage has
// built), and check both the printed output and the cluster's state.
//
// --command-config reads Kafka's client properties for TLS and SASL
// (security.protocol, ssl.truststore.*, ssl.keystore.*, sasl.mechanism,
// sasl.jaas.config) in their PEM form: see ClientConfig.
package admin
