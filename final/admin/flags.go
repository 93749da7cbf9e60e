package admin

import (
	"flag"
	"fmt"
	"sort"
	"strings"
)

// keyValue is one key=value of --config or --add-config.
type keyValue struct{ key, value string }

// keyValues is a flag that takes key=value, repeated or comma-joined
// (kafka-configs --add-config k1=v1,k2=v2), where a value holding commas
// goes in square brackets, as Kafka's tools write it:
//
//	--add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
type keyValues []keyValue

func (kvs *keyValues) String() string {
	s := make([]string, len(*kvs))
	for i, kv := range *kvs {
		s[i] = kv.key + "=" + kv.value
	}
	return strings.Join(s, ",")
}

func (kvs *keyValues) Set(text string) error {
	for _, item := range splitOutsideBrackets(text, ',') {
		key, value, ok := strings.Cut(item, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return fmt.Errorf("%q is not key=value", item)
		}
		value = strings.TrimSpace(value)
		if strings.HasPrefix(value, "[") && strings.HasSuffix(value, "]") {
			value = value[1 : len(value)-1]
		}
		*kvs = append(*kvs, keyValue{key, value})
	}
	return nil
}

// names is a flag of names, repeated or comma-joined (--delete-config).
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Set(text string) error {
	for _, s := range strings.Split(text, ",") {
		if s = strings.TrimSpace(s); s == "" {
			return fmt.Errorf("an empty name in %q", text)
		}
		*n = append(*n, s)
	}
	return nil
}

// splitOutsideBrackets splits s at sep where sep is not inside [...].
func splitOutsideBrackets(s string, sep byte) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// boolFlags registers a switch (a bool flag, off unless given) for each
// name, stored where its pointer says.
func boolFlags(fs *flag.FlagSet, flags map[string]*bool) {
	for name, p := range flags {
		fs.BoolVar(p, name, false, "")
	}
}

// oneAction checks, after parsing, that exactly one of the action
// switches (as given to boolFlags) is set and returns it as written on the
// command line ("--list").
func oneAction(actions map[string]*bool) (string, error) {
	var set, all []string
	for name, on := range actions {
		all = append(all, "--"+name)
		if *on {
			set = append(set, "--"+name)
		}
	}
	sort.Strings(all)
	sort.Strings(set)
	if len(set) != 1 {
		return "", usagef("exactly one of %s is required", strings.Join(all, ", "))
	}
	return set[0], nil
}

// parseAction parses args (parse), checks that exactly one of the
// actions is given (oneAction) and returns it with the set of flags given
// (setFlags).
func parseAction(fs *flag.FlagSet, args []string, actions map[string]*bool) (action string, set map[string]bool, err error) {
	if err := parse(fs, args); err != nil {
		return "", nil, err
	}
	if action, err = oneAction(actions); err != nil {
		return "", nil, err
	}
	return action, setFlags(fs), nil
}

// setFlags is the set of flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
