package store

import "fmt"

// maxTopicNameLength is Kafka's limit (249: a partition directory name adds
// "-<partition>" and must fit in 255 bytes).
const maxTopicNameLength = 249

// ValidateTopicName applies Kafka's rules: 1 to 249 characters from
// [a-zA-Z0-9._-], and not "." or "..".
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name cannot be %q", name)
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("topic name is %d characters, the limit is %d", len(name), maxTopicNameLength)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q contains %q: only ASCII letters, digits, '.', '_' and '-' are allowed", name, c)
		}
	}
	return nil
}
