package server

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// DescribeLogDirs (key 35), v0-v4: what this broker's log directory
// holds (kafka-log-dirs.sh, an admin client's DescribeLogDirs): each
// partition's size on disk, its offset lag and whether it is a future
// log; from v4 the size of the file system and what is free on it. It
// lives here, not in stage 02, because the lag is a replica's: Kafka
// reports max(high watermark - log end offset, 0) for a current log,
// which is 0 on a leader and on any follower whose log reaches the high
// watermark it was told, and the lag behind the current log for a future
// one (a log being moved to another directory by AlterReplicaLogDirs;
// this broker has one directory, so there is none: is_future is always
// false). A partition with a log but no replica here (not told its role
// yet) has lag -1, Kafka's "not available".
//
// null topics asks for every partition; a list asks for those partitions
// only, and a topic with none of them here is left out. A directory that
// cannot be read (its file system fails statfs) is answered with
// KAFKA_STORAGE_ERROR and nothing else, as Kafka answers for an offline
// directory; a partition whose log failed to open (stage 02's offline
// partition) is not listed, as Kafka lists only the logs it loaded. There
// is no authorizer, so no CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) describeLogDirsAPI() broker.API {
	return broker.API{Key: 35, MinVersion: 0, MaxVersion: 4, Handle: s.handleDescribeLogDirs}
}

func (s *Server) handleDescribeLogDirs(r *broker.Request) {
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = s.Store().Dir()
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	total, usable, err := diskSpace(dir.Dir)
	if err != nil {
		s.Logger().Warn("cannot describe the log directory", "dir", dir.Dir, "err", err)
		dir.ErrorCode = kerr.KafkaStorageError.Code
		resp.Dirs = append(resp.Dirs, dir)
		r.Respond(resp)
		return
	}
	dir.TotalBytes, dir.UsableBytes = total, usable
	var wanted map[string]map[int32]bool // nil: every partition
	if req.Topics != nil {
		wanted = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			if wanted[t.Topic] == nil {
				wanted[t.Topic] = map[int32]bool{}
			}
			for _, p := range t.Partitions {
				wanted[t.Topic][p] = true
			}
		}
	}
	for _, p := range s.Store().Partitions() { // in topic, then partition order
		if wanted != nil && !wanted[p.Topic][p.Partition] {
			continue
		}
		out := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		out.Partition, out.Size, out.OffsetLag = p.Partition, p.Log.Size(), -1
		if rp, ok := s.Replicas.Partition(p.Topic, p.Partition); ok {
			out.OffsetLag = max(rp.HighWatermark()-p.Log.EndOffset(), 0)
		}
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = p.Topic
			dir.Topics = append(dir.Topics, t)
		}
		t := &dir.Topics[len(dir.Topics)-1]
		t.Partitions = append(t.Partitions, out)
	}
	resp.Dirs = append(resp.Dirs, dir)
	r.Respond(resp)
}
