package admin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// resetHow is where --reset-offsets moves each partition's offset.
type resetHow struct {
	kind  string // "earliest", "latest", "offset" or "shift"
	value int64  // the offset of --to-offset, the delta of --shift-by
}

// resetSpec checks --reset-offsets' flags.
func resetSpec(f groupsFlags, set map[string]bool) (resetHow, error) {
	var hows []string
	var how resetHow
	if f.toEarliest {
		hows, how = append(hows, "--to-earliest"), resetHow{kind: "earliest"}
	}
	if f.toLatest {
		hows, how = append(hows, "--to-latest"), resetHow{kind: "latest"}
	}
	if set["to-offset"] {
		hows, how = append(hows, "--to-offset"), resetHow{kind: "offset", value: f.toOffset}
	}
	if set["shift-by"] {
		hows, how = append(hows, "--shift-by"), resetHow{kind: "shift", value: f.shiftBy}
	}
	switch {
	case len(hows) != 1:
		return how, usagef("--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset, --shift-by")
	case len(f.topics) == 0 && !f.allTopics, len(f.topics) > 0 && f.allTopics:
		return how, usagef("--reset-offsets needs --topic or --all-topics (one of them)")
	case f.dryRun && f.exec:
		return how, usagef("--dry-run and --execute exclude each other")
	case how.kind == "offset" && how.value < 0:
		return how, usagef("--to-offset %d: an offset is not negative", how.value)
	}
	return how, nil
}

// resetOffsets computes the group's new offsets, prints them and, with
// execute, commits them. Kafka resets only a group without members: a
// live member would commit its own position over the reset.
func (s *session) resetOffsets(ctx context.Context, group string, topics []string, allTopics bool, how resetHow, execute bool) error {
	described, err := s.adm.DescribeGroups(ctx, group)
	if err != nil {
		return reach(err)
	}
	d := described[group]
	if d.Err != nil {
		return kafkaError("consumer group", group, "describe", d.Err, d.ErrMessage)
	}
	if d.State != "Empty" && d.State != "Dead" && d.State != "" {
		return fmt.Errorf("assignments can only be reset if the group '%s' is inactive, but the current state is %s",
			group, d.State)
	}
	committed, err := s.adm.FetchOffsets(ctx, group)
	if err != nil {
		return kafkaError("consumer group", group, "fetch the offsets of", err, "")
	}

	// The partitions to reset.
	parts := kadm.TopicsSet{}
	if allTopics {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				parts.Add(o.Topic, o.Partition)
			}
		})
	} else {
		for _, spec := range topics {
			if err := s.addTopicPartitions(ctx, parts, spec); err != nil {
				return err
			}
		}
	}
	if len(parts) == 0 {
		return fmt.Errorf("consumer group %s has no committed offsets to reset (--all-topics)", group)
	}

	starts, err := s.adm.ListStartOffsets(ctx, parts.Topics()...)
	if err != nil {
		return reach(err)
	}
	ends, err := s.adm.ListEndOffsets(ctx, parts.Topics()...)
	if err != nil {
		return reach(err)
	}
	next := kadm.Offsets{}
	for _, tp := range parts.Sorted() {
		for _, p := range tp.Partitions {
			start, okS := starts.Lookup(tp.Topic, p)
			end, okE := ends.Lookup(tp.Topic, p)
			switch {
			case !okS || !okE:
				return fmt.Errorf("list offsets of %s-%d: no answer for the partition", tp.Topic, p)
			case start.Err != nil:
				return kafkaError("partition", fmt.Sprintf("%s-%d", tp.Topic, p), "list the offsets of", start.Err, "")
			case end.Err != nil:
				return kafkaError("partition", fmt.Sprintf("%s-%d", tp.Topic, p), "list the offsets of", end.Err, "")
			}
			var at int64
			switch how.kind {
			case "earliest":
				at = start.Offset
			case "latest":
				at = end.Offset
			case "offset":
				at = how.value
			case "shift":
				c, ok := committed.Lookup(tp.Topic, p)
				if !ok || c.Err != nil || c.At < 0 {
					return fmt.Errorf("--shift-by: consumer group %s has no committed offset for %s-%d to shift", group, tp.Topic, p)
				}
				at = c.At + how.value
			}
			if at < start.Offset {
				fmt.Fprintf(s.errOut, "WARN: new offset (%d) is lower than the earliest offset of %s-%d: it is set to %d.\n",
					at, tp.Topic, p, start.Offset)
				at = start.Offset
			} else if at > end.Offset {
				fmt.Fprintf(s.errOut, "WARN: new offset (%d) is higher than the latest offset of %s-%d: it is set to %d.\n",
					at, tp.Topic, p, end.Offset)
				at = end.Offset
			}
			next.Add(kadm.Offset{Topic: tp.Topic, Partition: p, At: at, LeaderEpoch: -1})
		}
	}

	if execute {
		res, err := s.adm.CommitOffsets(ctx, group, next)
		if err != nil {
			return kafkaError("consumer group", group, "commit the offsets of", err, "")
		}
		if err := res.Error(); err != nil {
			return kafkaError("consumer group", group, "commit the offsets of", err, "")
		}
	} else {
		fmt.Fprintln(s.errOut, "WARN: no action was performed: this is a dry run; add --execute to commit the new offsets.")
	}
	t := table{header: []string{"GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"}}
	for _, o := range next.Sorted() {
		t.add(group, o.Topic, strconv.Itoa(int(o.Partition)), strconv.FormatInt(o.At, 10))
	}
	fmt.Fprintln(s.out)
	t.print(s.out)
	return nil
}

// addTopicPartitions adds the partitions that a --topic value names (t:
// all of t's; t:0,2: those) to parts, checking them against the
// topic's metadata.
func (s *session) addTopicPartitions(ctx context.Context, parts kadm.TopicsSet, spec string) error {
	topic, list, hasList := strings.Cut(spec, ":")
	details, err := s.adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return reach(err)
	}
	d, ok := details[topic]
	if !ok || d.Err == kerr.UnknownTopicOrPartition {
		return kafkaError("topic", topic, "reset offsets of", kerr.UnknownTopicOrPartition, "")
	}
	if d.Err != nil {
		return kafkaError("topic", topic, "reset offsets of", d.Err, "")
	}
	have := d.Partitions.Numbers()
	if !hasList {
		parts.Add(topic, have...)
		return nil
	}
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil {
			return usagef("--topic %s: %q is not a partition number", spec, p)
		}
		if !slices.Contains(have, int32(n)) {
			return kafkaError("partition", fmt.Sprintf("%s-%d", topic, n), "reset offsets of", kerr.UnknownTopicOrPartition, "")
		}
		parts.Add(topic, int32(n))
	}
	return nil
}
