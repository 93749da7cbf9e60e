package store

import (
	"fmt"
	"os"
	"strings"
)

// ParseProperties reads the Java properties format of Kafka's
// meta.properties and server.properties (which the broker reads with it):
// "key=value", "key: value" or "key value" lines, '#' and '!' comments, and
// a backslash at the end of a line continuing it.
func ParseProperties(text string) (map[string]string, error) {
	props := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + strings.TrimSpace(lines[i])
		}
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		sep := strings.IndexAny(line, "=: \t")
		if sep < 0 {
			return nil, fmt.Errorf("line %d: %q has no value", lineNo, line)
		}
		key := strings.TrimSpace(line[:sep])
		value := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line[sep:]), "=:"))
		props[key] = value
	}
	return props, nil
}

// ReadPropertiesFile reads a properties file.
func ReadPropertiesFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	props, err := ParseProperties(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}
