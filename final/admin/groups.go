package admin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

const groupsUsage = `admin groups: list, describe, delete consumer groups and reset their offsets
(Kafka's kafka-consumer-groups.sh, with the same flags and output)

Usage:
  admin groups --bootstrap-server host:port --list
  admin groups --bootstrap-server host:port --describe --group g [--group g2]... [--state | --members]
  admin groups --bootstrap-server host:port --delete --group g [--group g2]...
  admin groups --bootstrap-server host:port --reset-offsets --group g
               (--topic t[:p,p...]... | --all-topics)
               (--to-earliest | --to-latest | --to-offset n | --shift-by n)
               [--dry-run | --execute]

Actions (exactly one):
  --list            print every group's name, one a line (ListGroups on every broker)
  --describe        print each partition the group consumes or has committed:
                      GROUP  TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID
                    CURRENT-OFFSET is the group's committed offset, LOG-END-OFFSET the
                    partition's high watermark, LAG their difference; "-" where there is
                    none (no commit, no member). A group without members says so first.
                    With --state, one line a group instead:
                      GROUP  COORDINATOR (ID)  ASSIGNMENT-STRATEGY  STATE  #MEMBERS
                    with --members, one line a member:
                      GROUP  CONSUMER-ID  HOST  CLIENT-ID  #PARTITIONS
  --delete          delete the groups' committed offsets and state (DeleteGroups); a group
                    must have no members
  --reset-offsets   compute new committed offsets for the group and, with --execute, commit
                    them (OffsetCommit). Like Kafka, it is a dry run unless --execute is
                    given, and the group must have no members (stop its consumers first).

Options:
  --group g         the group to act on (repeat for --describe and --delete)
  --state           --describe: the group's coordinator, assignor, state and size
  --members         --describe: the group's members and how many partitions each has
  --topic t         --reset-offsets: a topic whose partitions to reset, or t:0,2 for some
                    of them; repeat for several
  --all-topics      --reset-offsets: every topic the group has committed offsets for
  --to-earliest     reset to each partition's log start offset
  --to-latest       reset to each partition's log end offset (skip everything there now)
  --to-offset n     reset to offset n, kept within [log start, log end]
  --shift-by n      move each committed offset by n (negative: back), kept within the log
  --dry-run         print the new offsets and commit nothing (the default)
  --execute         commit the new offsets
  --bootstrap-server, --command-config, --timeout: see 'admin help'

Examples:
  admin groups --bootstrap-server localhost:9092 --describe --group billing
  admin groups --bootstrap-server localhost:9092 --reset-offsets --group billing \
      --topic orders --to-earliest --execute
`

// groupsFlags are the flags of admin groups.
type groupsFlags struct {
	conn                               connFlags
	list, describe, del, reset         bool
	state, members                     bool
	groups                             names
	topics                             names
	allTopics                          bool
	toEarliest, toLatest, dryRun, exec bool
	toOffset, shiftBy                  int64
}

func runGroups(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f groupsFlags
	fs := newFlagSet("groups")
	f.conn.register(fs)
	actions := map[string]*bool{"list": &f.list, "describe": &f.describe, "delete": &f.del, "reset-offsets": &f.reset}
	boolFlags(fs, actions)
	boolFlags(fs, map[string]*bool{"state": &f.state, "members": &f.members, "all-topics": &f.allTopics,
		"to-earliest": &f.toEarliest, "to-latest": &f.toLatest, "dry-run": &f.dryRun, "execute": &f.exec})
	fs.Var(&f.groups, "group", "")
	fs.Var(&topicList{&f.topics}, "topic", "")
	fs.Int64Var(&f.toOffset, "to-offset", 0, "")
	fs.Int64Var(&f.shiftBy, "shift-by", 0, "")
	action, set, err := parseAction(fs, args, actions)
	if err != nil {
		return err
	}
	switch {
	case !f.list && len(f.groups) == 0:
		return usagef("%s needs --group", action)
	case f.list && len(f.groups) > 0:
		return usagef("--list takes no --group")
	case f.reset && len(f.groups) != 1:
		return usagef("--reset-offsets takes one --group")
	case (f.state || f.members) && !f.describe:
		return usagef("--state and --members go with --describe")
	case f.state && f.members:
		return usagef("--state and --members exclude each other")
	}
	var how resetHow
	if f.reset {
		if how, err = resetSpec(f, set); err != nil {
			return err
		}
	} else {
		for _, k := range []string{"topic", "all-topics", "to-earliest", "to-latest", "to-offset", "shift-by", "dry-run", "execute"} {
			if set[k] {
				return usagef("--%s goes with --reset-offsets", k)
			}
		}
	}

	s, ctx, err := f.conn.connect(ctx, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	switch {
	case f.list:
		return s.listGroups(ctx)
	case f.describe && (f.state || f.members):
		return s.describeGroupsBrief(ctx, f.groups, f.members)
	case f.describe:
		for _, g := range f.groups {
			if err := s.describeGroup(ctx, g); err != nil {
				return err
			}
		}
		return nil
	case f.del:
		return s.deleteGroups(ctx, f.groups)
	default:
		return s.resetOffsets(ctx, f.groups[0], f.topics, f.allTopics, how, f.exec)
	}
}

// topicList is --topic for groups: repeated, each t or t:0,1 (so the
// comma is not a separator here).
type topicList struct{ to *names }

func (t topicList) String() string {
	if t.to == nil {
		return ""
	}
	return t.to.String()
}

func (t topicList) Set(s string) error {
	if s == "" {
		return fmt.Errorf("an empty topic")
	}
	*t.to = append(*t.to, s)
	return nil
}

func (s *session) listGroups(ctx context.Context) error {
	groups, err := s.adm.ListGroups(ctx)
	if err != nil {
		return reach(err)
	}
	for _, g := range groups.Groups() {
		fmt.Fprintln(s.out, g)
	}
	return nil
}

func (s *session) describeGroup(ctx context.Context, group string) error {
	lags, err := s.adm.Lag(ctx, group)
	if err != nil {
		return reach(err)
	}
	l, ok := lags[group]
	switch {
	case !ok:
		return kafkaError("consumer group", group, "describe", kerr.GroupIDNotFound, "")
	case l.DescribeErr != nil:
		return kafkaError("consumer group", group, "describe", l.DescribeErr, "")
	case l.State == "Dead":
		// Kafka answers DescribeGroups for an unknown group with a
		// Dead group, not an error.
		return kafkaError("consumer group", group, "describe", kerr.GroupIDNotFound, "")
	case l.FetchErr != nil:
		return kafkaError("consumer group", group, "fetch the offsets of", l.FetchErr, "")
	}
	switch l.State {
	case "Empty":
		fmt.Fprintf(s.out, "\nConsumer group '%s' has no active members.\n", group)
	case "PreparingRebalance", "CompletingRebalance":
		fmt.Fprintf(s.out, "\nWarning: Consumer group '%s' is rebalancing.\n", group)
	}
	t := table{header: []string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
		"CONSUMER-ID", "HOST", "CLIENT-ID"}}
	consuming := map[string]bool{}
	for _, p := range l.Lag.Sorted() {
		current, end, lag := "-", "-", "-"
		if p.End.Err == nil {
			end = strconv.FormatInt(p.End.Offset, 10)
		}
		if p.Commit.At >= 0 {
			current = strconv.FormatInt(p.Commit.At, 10)
			if p.Err == nil {
				lag = strconv.FormatInt(p.Lag, 10)
			}
		}
		member, host, client := "-", "-", "-"
		if p.Member != nil {
			member, host, client = p.Member.MemberID, p.Member.ClientHost, p.Member.ClientID
			consuming[member] = true
		}
		t.add(group, p.Topic, strconv.Itoa(int(p.Partition)), current, end, lag, member, host, client)
	}
	// Members with nothing assigned still show, as Kafka's tool shows
	// them: a row of dashes with who they are.
	for _, m := range l.Members {
		if !consuming[m.MemberID] {
			t.add(group, "-", "-", "-", "-", "-", m.MemberID, m.ClientHost, m.ClientID)
		}
	}
	fmt.Fprintln(s.out)
	t.print(s.out)
	return nil
}

// describeGroupsBrief is --describe --state (one line a group) and
// --describe --members (one line a member).
func (s *session) describeGroupsBrief(ctx context.Context, groups []string, members bool) error {
	described, err := s.adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return reach(err)
	}
	t := table{header: []string{"GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"}}
	if members {
		t.header = []string{"GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"}
	}
	for _, g := range groups {
		d, ok := described[g]
		switch {
		case !ok || d.State == "Dead":
			return kafkaError("consumer group", g, "describe", kerr.GroupIDNotFound, "")
		case d.Err != nil:
			return kafkaError("consumer group", g, "describe", d.Err, d.ErrMessage)
		case !members:
			coordinator := fmt.Sprintf("%s:%d (%d)", d.Coordinator.Host, d.Coordinator.Port, d.Coordinator.NodeID)
			t.add(g, coordinator, d.Protocol, d.State, strconv.Itoa(len(d.Members)))
			continue
		}
		if len(d.Members) == 0 {
			fmt.Fprintf(s.out, "\nConsumer group '%s' has no active members.\n", g)
		}
		for _, m := range d.Members {
			n := 0
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, at := range a.Topics {
					n += len(at.Partitions)
				}
			}
			t.add(g, m.MemberID, m.ClientHost, m.ClientID, strconv.Itoa(n))
		}
	}
	fmt.Fprintln(s.out)
	t.print(s.out)
	return nil
}

func (s *session) deleteGroups(ctx context.Context, groups []string) error {
	res, err := s.adm.DeleteGroups(ctx, groups...)
	if err != nil {
		return reach(err)
	}
	var failed []string
	for _, g := range groups {
		if r := res[g]; r.Err != nil {
			failed = append(failed, kafkaError("consumer group", g, "delete", r.Err, r.ErrMessage).Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	quoted := make([]string, len(groups))
	for i, g := range groups {
		quoted[i] = "'" + g + "'"
	}
	fmt.Fprintf(s.out, "Deletion of requested consumer groups (%s) was successful.\n", strings.Join(quoted, ", "))
	return nil
}
