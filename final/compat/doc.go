// Package compat holds the final broker's compatibility suite: a
// three-broker cluster of the final broker command on a three-node
// ZooKeeper ensemble, used by clients nobody in this project wrote —
// kcat (librdkafka), franz-go (kgo and kadm), Sarama and segmentio's
// kafka-go — each check asserting what the client read back or what the
// cluster holds afterwards, not just that no error came back. The suite
// is the compatibility matrix of docs/07-final.md.
package compat
