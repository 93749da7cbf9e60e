package consumer

import (
	"fmt"
	"strings"
)

// AssignForTest runs the assignor named strategy and formats its plan as
// "member:topic-partition,… member:…", members sorted.
func AssignForTest(strategy string, subs map[string][]string, partitions map[string]int32) string {
	plan := assignorNamed(strategy).assign(subs, partitions)
	var b strings.Builder
	for _, m := range sortedKeys(plan) {
		var parts []string
		for _, tp := range plan[m] {
			parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		}
		fmt.Fprintf(&b, "%s:%s ", m, strings.Join(parts, ","))
	}
	return b.String()
}
