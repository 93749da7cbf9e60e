package store

import "github.com/kafkaworkbook/workbook/stage01-log/commitlog"

// Partition is one partition this broker holds: its log, and a Signal
// raised after every append (long-poll fetches; stage 03's followers).
type Partition struct {
	commitlog.TopicPartition
	Log      *commitlog.Log
	Appended Signal
}
