package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Topic is the internal topic holding groups and offsets.
const Topic = "__consumer_offsets"

// PartitionFor is the partition of __consumer_offsets that holds a
// group, as Kafka computes it: Utils.abs(groupId.hashCode) % partitions,
// with Java's String.hashCode (over UTF-16 code units, int32 arithmetic),
// so that a group lands on the same partition number as in Kafka.
func PartitionFor(groupID string, partitions int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 { // Utils.abs maps Integer.MIN_VALUE to 0
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// The records of __consumer_offsets, with Kafka's schemas (the key's
// leading int16 version tells them apart):
//
//	key OffsetCommitKey v1 {group, topic, partition}
//	    -> OffsetCommitValue v3 {offset, leader epoch, metadata, commit time}
//	       (v1, with an expire time, when a v1 OffsetCommit asked for one)
//	key GroupMetadataKey v2 {group}
//	    -> GroupMetadataValue v3 {protocol type, generation, protocol,
//	       leader, state time, members: id, instance id, client id and
//	       host, timeouts, subscription, assignment}
//
// A null value (a tombstone) deletes the key: an offset deleted or
// expired, a group deleted. Compaction keeps only the latest record per
// key, which is what loading needs.
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	groupKeyVersion    = 2
	groupValueVersion  = 3
)

func offsetKey(group string, tp commitlog.TopicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.Topic, Partition: tp.Partition}
	return k.AppendTo(nil)
}

func offsetValue(o Offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = offsetValueVersion, o.Offset, o.LeaderEpoch, o.Metadata, o.CommitTime
	if o.ExpireTime >= 0 {
		v.Version, v.ExpireTimestamp = 1, o.ExpireTime
	}
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// groupValue is the group's metadata record as Kafka writes it after a
// rebalance: the generation, its leader and protocol, and each member with
// its subscription and assignment (assignments overrides the members' own
// when given: the leader's SyncGroup, stored before it takes effect).
func groupValue(g *Group, assignments map[string][]byte) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation, v.CurrentStateTimestamp = groupValueVersion, g.protoType, g.generation, g.stateTime.UnixMilli()
	if g.protocol != "" {
		v.Protocol = &g.protocol
	}
	if g.leader != "" {
		v.Leader = &g.leader
	}
	for _, m := range g.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = int32(m.rebalance.Milliseconds()), int32(m.session.Milliseconds())
		vm.Subscription, vm.Assignment = m.metadata(g.protocol), m.assignment
		if a, ok := assignments[m.id]; ok {
			vm.Assignment = a
		}
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// batchOf encodes records as one uncompressed batch
// (offsets.topic.compression.codec is none by default).
func batchOf(now time.Time, keys, values [][]byte) []byte {
	recs := make([]record.Record, len(keys))
	for i := range keys {
		recs[i] = record.Record{OffsetDelta: int32(i), Key: keys[i], Value: values[i]}
	}
	b, err := record.AppendBatch(nil, record.NewBatch(now.UnixMilli(), recs...))
	if err != nil {
		panic(err) // records of our own making always encode
	}
	return b
}

// loaded is what reading a partition of __consumer_offsets finds: the
// latest metadata of each group and its offsets; a tombstone removes.
type loaded struct {
	groups  map[string]*kmsg.GroupMetadataValue // nil value: deleted
	offsets map[string]map[commitlog.TopicPartition]Offset
	txns    map[int64]loadedTxn // offsets of transactions whose markers were not read yet
}

var errUnknownKey = errors.New("unknown key version in __consumer_offsets")

// apply folds one record into l.
func (l *loaded) apply(key, value []byte) error {
	if len(key) < 2 {
		return fmt.Errorf("%w: a %d-byte key", errUnknownKey, len(key))
	}
	switch version := int16(binary.BigEndian.Uint16(key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("offset commit key: %w", err)
		}
		tp := commitlog.TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			delete(l.offsets[k.Group], tp)
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("offset commit value of group %q: %w", k.Group, err)
		}
		o := Offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTime: v.CommitTimestamp, ExpireTime: -1}
		if v.Version >= 3 {
			o.LeaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 {
			o.ExpireTime = v.ExpireTimestamp
		}
		if l.offsets[k.Group] == nil {
			l.offsets[k.Group] = map[commitlog.TopicPartition]Offset{}
		}
		l.offsets[k.Group][tp] = o
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("group metadata key: %w", err)
		}
		if value == nil {
			l.groups[k.Group] = nil
			delete(l.offsets, k.Group)
			return nil
		}
		v := new(kmsg.GroupMetadataValue)
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("group metadata value of group %q: %w", k.Group, err)
		}
		l.groups[k.Group] = v
	default:
		return fmt.Errorf("%w: %d", errUnknownKey, version)
	}
	return nil
}
