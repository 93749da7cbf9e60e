package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const reassignUsage = `admin reassign: move partitions' replicas to other brokers, and follow the moves
(Kafka's kafka-reassign-partitions.sh, with its --execute, --verify, --list
and --cancel and its JSON plan; --topic and --replicas name a plan on the
command line instead)

Usage:
  admin reassign --bootstrap-server host:port --execute (--topic name --replicas p=ids... | --reassignment-json-file f)
  admin reassign --bootstrap-server host:port --verify  (--topic name --replicas p=ids... | --reassignment-json-file f)
  admin reassign --bootstrap-server host:port --list
  admin reassign --bootstrap-server host:port --cancel  (--topic name --replicas p=ids... | --reassignment-json-file f)

Actions (exactly one):
  --execute   start moving each partition of the plan to its replicas
              (AlterPartitionReassignments). The brokers copy the partition to
              the new replicas, then drop the old ones; the data stays readable
              throughout. Prints the current assignment first, as a plan that
              moves everything back, then the partitions it started.
  --verify    say of each partition of the plan whether its move is complete:
                Reassignment of partition orders-0 is complete.
                Reassignment of partition orders-1 is still in progress.
  --list      print the moves in progress (ListPartitionReassignments):
                orders-1: replicas: 0,1,2,3. adding: 3. removing: 0.
  --cancel    stop the plan's moves that are still in progress; their replicas
              go back to where they were

Options:
  --topic name                the topic whose partitions --replicas names
  --replicas p=ids            partition p's new replicas, the preferred leader
                              first: --replicas 0=1,2,3; repeat for each partition
  --reassignment-json-file f  a plan in Kafka's format instead:
                              {"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,3]}]}
  --bootstrap-server, --command-config, --timeout: see 'admin help'

Examples:
  admin reassign --bootstrap-server localhost:9092 --execute --topic orders \
      --replicas 0=1,2,3 --replicas 1=2,3,1 --replicas 2=3,1,2
  admin reassign --bootstrap-server localhost:9092 --verify --topic orders \
      --replicas 0=1,2,3 --replicas 1=2,3,1 --replicas 2=3,1,2
  admin reassign --bootstrap-server localhost:9092 --list
`

// plan is a reassignment plan in kafka-reassign-partitions' JSON format.
type plan struct {
	Version    int             `json:"version"`
	Partitions []planPartition `json:"partitions"`
}

// planPartition is one partition of a plan and its replicas.
type planPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// name is the partition as Kafka's tools print one: orders-0.
func (p planPartition) name() string { return p.Topic + "-" + strconv.Itoa(int(p.Partition)) }

// partitionReplicas is the --replicas flag: p=id,id,..., repeated.
type partitionReplicas []planPartition

func (r *partitionReplicas) String() string {
	s := make([]string, len(*r))
	for i, p := range *r {
		s[i] = fmt.Sprintf("%d=%s", p.Partition, joinIDs(p.Replicas))
	}
	return strings.Join(s, " ")
}

func (r *partitionReplicas) Set(text string) error {
	part, list, ok := strings.Cut(text, "=")
	p, err := strconv.ParseInt(strings.TrimSpace(part), 10, 32)
	if !ok || err != nil || p < 0 {
		return fmt.Errorf("%q is not partition=broker,broker,... (0=1,2,3)", text)
	}
	var ids []int32
	for _, s := range strings.Split(list, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || id < 0 {
			return fmt.Errorf("%q: %q is not a broker id", text, s)
		}
		ids = append(ids, int32(id))
	}
	*r = append(*r, planPartition{Partition: int32(p), Replicas: ids})
	return nil
}

// reassignFlags are the flags of admin reassign.
type reassignFlags struct {
	conn                          connFlags
	execute, verify, list, cancel bool
	topic                         string
	replicas                      partitionReplicas
	jsonFile                      string
}

func runReassign(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f reassignFlags
	fs := newFlagSet("reassign")
	f.conn.register(fs)
	actions := map[string]*bool{"execute": &f.execute, "verify": &f.verify, "list": &f.list, "cancel": &f.cancel}
	boolFlags(fs, actions)
	fs.StringVar(&f.topic, "topic", "", "")
	fs.Var(&f.replicas, "replicas", "")
	fs.StringVar(&f.jsonFile, "reassignment-json-file", "", "")
	action, _, err := parseAction(fs, args, actions)
	if err != nil {
		return err
	}
	var p plan
	switch {
	case f.list:
		if f.topic != "" || len(f.replicas) > 0 || f.jsonFile != "" {
			return usagef("--list takes no plan: it lists every move in progress")
		}
	case f.jsonFile != "" && (f.topic != "" || len(f.replicas) > 0):
		return usagef("give the plan either as --reassignment-json-file or as --topic and --replicas, not both")
	case f.jsonFile != "":
		if p, err = readPlan(f.jsonFile); err != nil {
			return err
		}
	case f.topic == "" || len(f.replicas) == 0:
		return usagef("%s needs a plan: --topic and --replicas, or --reassignment-json-file", action)
	default:
		for _, r := range f.replicas {
			r.Topic = f.topic
			p.Partitions = append(p.Partitions, r)
		}
	}
	if err := p.check(); err != nil {
		return err
	}

	s, ctx, err := f.conn.connect(ctx, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.require(ctx, 46, "admin reassign"); err != nil {
		return err
	}
	switch {
	case f.execute:
		return s.executeReassignment(ctx, p)
	case f.verify:
		return s.verifyReassignment(ctx, p)
	case f.list:
		return s.listReassignments(ctx)
	default:
		return s.cancelReassignment(ctx, p)
	}
}

// readPlan reads a plan in Kafka's JSON format.
func readPlan(path string) (plan, error) {
	var p plan
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("read the plan %s: %w", path, err)
	}
	if len(p.Partitions) == 0 {
		return p, fmt.Errorf("the plan %s names no partitions", path)
	}
	return p, nil
}

// check refuses a plan that names a partition twice or gives one no
// replicas or a broker twice: mistakes of the plan, found before asking.
func (p plan) check() error {
	seen := map[string]bool{}
	for _, pp := range p.Partitions {
		if seen[pp.name()] {
			return usagef("partition %s is in the plan twice", pp.name())
		}
		seen[pp.name()] = true
		ids := slices.Clone(pp.Replicas)
		slices.Sort(ids)
		if len(ids) == 0 || len(slices.Compact(ids)) != len(pp.Replicas) {
			return usagef("partition %s: the replicas %s must be distinct broker ids", pp.name(), joinIDs(pp.Replicas))
		}
	}
	return nil
}

// topics is the set of the plan's topics.
func (p plan) topics() []string {
	var ts []string
	for _, pp := range p.Partitions {
		if !slices.Contains(ts, pp.Topic) {
			ts = append(ts, pp.Topic)
		}
	}
	return ts
}

// currentAssignment returns the plan's partitions with the replicas the
// cluster's metadata has for them now: the plan that moves them back.
func (s *session) currentAssignment(ctx context.Context, p plan) (plan, error) {
	topics, err := s.adm.ListTopics(ctx, p.topics()...)
	if err != nil {
		return plan{}, reach(err)
	}
	now := plan{Version: 1}
	for _, pp := range p.Partitions {
		t, ok := topics[pp.Topic]
		if !ok || t.Err != nil {
			return plan{}, kafkaError("topic", pp.Topic, "reassign", kerr.UnknownTopicOrPartition, "")
		}
		d, ok := t.Partitions[pp.Partition]
		if !ok {
			return plan{}, kafkaError("partition", pp.name(), "reassign", kerr.UnknownTopicOrPartition, "")
		}
		now.Partitions = append(now.Partitions, planPartition{Topic: pp.Topic, Partition: pp.Partition, Replicas: d.Replicas})
	}
	return now, nil
}

// alter sends the plan (or, with cancel, the cancellation of its moves)
// to the controller and returns the first partition's error.
func (s *session) alter(ctx context.Context, p plan, cancel bool) error {
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, pp := range p.Partitions {
		if cancel {
			req.CancelAssign(pp.Topic, pp.Partition)
		} else {
			req.Assign(pp.Topic, pp.Partition, pp.Replicas)
		}
	}
	res, err := s.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return reach(err)
	}
	verb := "reassign"
	if cancel {
		verb = "cancel the reassignment of"
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			return kafkaError("partition", fmt.Sprintf("%s-%d", r.Topic, r.Partition), verb, r.Err, r.ErrMessage)
		}
	}
	return nil
}

func (s *session) executeReassignment(ctx context.Context, p plan) error {
	now, err := s.currentAssignment(ctx, p)
	if err != nil {
		return err
	}
	rollback, err := json.Marshal(now)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "Current partition replica assignment\n\n%s\n\n", rollback)
	fmt.Fprintln(s.out, "Save this to use as the --reassignment-json-file option during rollback")
	if err := s.alter(ctx, p, false); err != nil {
		return err
	}
	names := make([]string, len(p.Partitions))
	for i, pp := range p.Partitions {
		names[i] = pp.name()
	}
	fmt.Fprintf(s.out, "Successfully started partition reassignments for %s\n", strings.Join(names, ","))
	return nil
}

// inProgress returns the moves in progress, every one (the request's
// topics null, which kadm's ListPartitionReassignments cannot send).
func (s *session) inProgress(ctx context.Context) ([]kmsg.ListPartitionReassignmentsResponseTopic, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, reach(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return nil, kafkaError("reassignments", "in progress", "list", err, msg)
	}
	slices.SortFunc(resp.Topics, func(a, b kmsg.ListPartitionReassignmentsResponseTopic) int {
		return strings.Compare(a.Topic, b.Topic)
	})
	return resp.Topics, nil
}

func (s *session) verifyReassignment(ctx context.Context, p plan) error {
	moving, err := s.inProgress(ctx)
	if err != nil {
		return err
	}
	now, err := s.currentAssignment(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.out, "Status of partition reassignment:")
	var incomplete []string
	for i, pp := range p.Partitions {
		switch current := now.Partitions[i].Replicas; {
		case isMoving(moving, pp.Topic, pp.Partition):
			fmt.Fprintf(s.out, "Reassignment of partition %s is still in progress.\n", pp.name())
			incomplete = append(incomplete, pp.name())
		case slices.Equal(current, pp.Replicas):
			fmt.Fprintf(s.out, "Reassignment of partition %s is complete.\n", pp.name())
		default:
			fmt.Fprintf(s.out, "There is no active reassignment of partition %s, but replica set is %s rather than %s.\n",
				pp.name(), joinIDs(current), joinIDs(pp.Replicas))
			incomplete = append(incomplete, pp.name())
		}
	}
	if len(incomplete) > 0 {
		// A script waits for a move with: until admin reassign --verify ...; do sleep 1; done
		return fmt.Errorf("the reassignment of %s is not complete", strings.Join(incomplete, ","))
	}
	return nil
}

// isMoving reports whether the list of moves holds the partition.
func isMoving(moving []kmsg.ListPartitionReassignmentsResponseTopic, topic string, partition int32) bool {
	for _, t := range moving {
		if t.Topic == topic && slices.ContainsFunc(t.Partitions, func(p kmsg.ListPartitionReassignmentsResponseTopicPartition) bool {
			return p.Partition == partition
		}) {
			return true
		}
	}
	return false
}

func (s *session) listReassignments(ctx context.Context) error {
	moving, err := s.inProgress(ctx)
	if err != nil {
		return err
	}
	if len(moving) == 0 {
		fmt.Fprintln(s.out, "No partition reassignments found.")
		return nil
	}
	fmt.Fprintln(s.out, "Current partition reassignments:")
	for _, t := range moving {
		slices.SortFunc(t.Partitions, func(a, b kmsg.ListPartitionReassignmentsResponseTopicPartition) int {
			return int(a.Partition - b.Partition)
		})
		for _, p := range t.Partitions {
			fmt.Fprintf(s.out, "%s-%d: replicas: %s. adding: %s. removing: %s.\n", t.Topic, p.Partition,
				joinIDs(p.Replicas), joinIDs(p.AddingReplicas), joinIDs(p.RemovingReplicas))
		}
	}
	return nil
}

func (s *session) cancelReassignment(ctx context.Context, p plan) error {
	if err := s.alter(ctx, p, true); err != nil {
		return err
	}
	names := make([]string, len(p.Partitions))
	for i, pp := range p.Partitions {
		names[i] = pp.name()
	}
	fmt.Fprintf(s.out, "Successfully cancelled partition reassignments for: %s\n", strings.Join(names, ","))
	return nil
}
