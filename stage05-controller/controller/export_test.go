package controller

import "github.com/kafkaworkbook/workbook/stage01-log/commitlog"

// SetBeforeStateWrite makes the controller run f before each write of
// partition states, with the partitions about to be written (on its event
// goroutine, so f may write to ZooKeeper to change a state under it).
func SetBeforeStateWrite(c *Controller, f func(tps []commitlog.TopicPartition)) {
	set := make(chan struct{})
	c.queue.put(event{"SetBeforeStateWrite", func(c *Controller) {
		c.beforeStateWrite = f
		close(set)
	}})
	<-set
}
