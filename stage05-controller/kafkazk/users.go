package kafkazk

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// ConfigUsersPath holds each user's config: quotas and SCRAM credentials
// (final's SASL reads the latter).
const ConfigUsersPath = "/config/users"

// ConfigUserPath is a user's config znode; the name is sanitized as Kafka
// sanitizes it (SanitizeUser).
func ConfigUserPath(user string) string { return ConfigUsersPath + "/" + SanitizeUser(user) }

// SanitizeUser encodes a user name for a znode name as Kafka's Sanitizer
// does: URL encoding, with '*' as %2A and a space as %20.
func SanitizeUser(user string) string {
	s := url.QueryEscape(user)
	s = strings.ReplaceAll(s, "*", "%2A")
	return strings.ReplaceAll(s, "+", "%20")
}

// DesanitizeUser undoes SanitizeUser.
func DesanitizeUser(name string) (string, error) { return url.QueryUnescape(name) }

// SetUserConfig replaces a user's config and notifies every broker through
// /config/changes with the entity path users/<sanitized user>, as
// kafka-configs.sh --zookeeper --entity-type users does (Kafka's
// AdminZkClient.changeUserOrUserClientIdConfig).
func (c *Client) SetUserConfig(user string, config map[string]string) error {
	return c.setEntityConfig("users", SanitizeUser(user), config, true)
}

// UserConfig reads a user's config (none if it has none).
func (c *Client) UserConfig(user string) (map[string]string, error) {
	return c.entityConfig("users", SanitizeUser(user))
}

// Users lists the users that have a config, desanitized, sorted.
func (c *Client) Users() ([]string, error) {
	names, _, err := c.conn.Children(ConfigUsersPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kafkazk: list %s: %w", ConfigUsersPath, err)
	}
	users := make([]string, 0, len(names))
	for _, n := range names {
		u, err := DesanitizeUser(n)
		if err != nil {
			continue // not a name Kafka writes
		}
		users = append(users, u)
	}
	slices.Sort(users)
	return users, nil
}
