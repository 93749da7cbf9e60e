package security

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// CredentialCache holds SCRAM credentials by mechanism and user (Kafka's
// CredentialCache). It is safe for concurrent use: the gate reads it while
// the ZooKeeper watcher updates it.
type CredentialCache struct {
	mu    sync.RWMutex
	creds map[string]map[string]ScramCredential // mechanism -> user -> credential. Protected by mu.
}

// NewCredentialCache returns an empty cache.
func NewCredentialCache() *CredentialCache {
	return &CredentialCache{creds: map[string]map[string]ScramCredential{}}
}

// ScramCredential implements ScramCredentials.
func (c *CredentialCache) ScramCredential(mechanism, user string) (ScramCredential, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cred, ok := c.creds[mechanism][user]
	return cred, ok
}

// Set stores a user's credential for a mechanism.
func (c *CredentialCache) Set(mechanism, user string, cred ScramCredential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds[mechanism] == nil {
		c.creds[mechanism] = map[string]ScramCredential{}
	}
	c.creds[mechanism][user] = cred
}

// Remove forgets a user's credential for a mechanism.
func (c *CredentialCache) Remove(mechanism, user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.creds[mechanism], user)
}

// update replaces a user's credentials with those of its config, as
// Kafka's CredentialProvider.updateCredentials does: a mechanism the
// config does not name (or names with a credential that does not parse)
// has no credential afterwards.
func (c *CredentialCache) update(user string, config map[string]string, logger *slog.Logger) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		v, ok := config[mech]
		if !ok {
			c.Remove(mech, user)
			continue
		}
		cred, err := ParseScramCredential(v)
		if err != nil {
			logger.Warn("ignoring a SCRAM credential", "user", user, "mechanism", mech, "err", err)
			c.Remove(mech, user)
			continue
		}
		c.Set(mech, user, cred)
	}
}

// ZKCredentials keeps a CredentialCache as ZooKeeper holds the SCRAM
// credentials: every user's /config/users/<user> at start, then the user
// named by each new /config/changes notification (users/<user>), so that a
// user added with kafka-configs.sh (or AddScramCredential) logs in without
// a restart. This is Kafka's DynamicConfigManager with its
// UserConfigHandler, for credentials only (not quotas).
type ZKCredentials struct {
	*CredentialCache
	zk       *kafkazk.Client
	logger   *slog.Logger
	listener *kafkazk.ConfigChangeListener

	// mu orders the start's load against the listener's updates: each
	// reads ZooKeeper after taking it, so the last write wins.
	mu sync.Mutex
}

// WatchZKCredentials loads the credentials and follows their changes
// until Stop.
func WatchZKCredentials(z *kafkazk.Client, logger *slog.Logger) (*ZKCredentials, error) {
	return WatchZKCredentialsInto(z, NewCredentialCache(), logger)
}

// WatchZKCredentialsInto is WatchZKCredentials keeping the credentials in
// cache: a broker hands the cache to its SASL listeners when it builds
// them, before its ZooKeeper session exists, and fills it once it does.
func WatchZKCredentialsInto(z *kafkazk.Client, cache *CredentialCache, logger *slog.Logger) (*ZKCredentials, error) {
	if logger == nil {
		logger = slog.Default()
	}
	w := &ZKCredentials{CredentialCache: cache, zk: z, logger: logger}
	l, err := w.listenAndLoad()
	if err != nil {
		if l != nil {
			l.Stop() // outside w.mu: Stop waits for a callback that may be waiting for it
		}
		return nil, err
	}
	return w, nil
}

// listenAndLoad starts following notifications, then loads every user,
// holding w.mu so that a notification read meanwhile is applied after the
// load (the last read wins). On an error the listener, if it started, is
// returned for the caller to stop once w.mu is released.
func (w *ZKCredentials) listenAndLoad() (*kafkazk.ConfigChangeListener, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, err := w.zk.ListenConfigChanges(w.changed)
	if err != nil {
		return nil, err
	}
	w.listener = l
	users, err := w.zk.Users()
	if err != nil {
		return l, err
	}
	for _, u := range users {
		if err := w.load(u); err != nil {
			return l, err
		}
	}
	return l, nil
}

// Stop stops following changes; the cache keeps what it holds.
func (w *ZKCredentials) Stop() { w.listener.Stop() }

// changed reloads a user named by a notification: "users/<user>" (not
// "users/<user>/clients/<client-id>", a quota). A failed read is returned:
// the listener tries the notification again rather than leave an old
// password working.
func (w *ZKCredentials) changed(entity string) error {
	name, ok := strings.CutPrefix(entity, "users/")
	if !ok || strings.Contains(name, "/") || name == "<default>" {
		return nil
	}
	user, err := kafkazk.DesanitizeUser(name)
	if err != nil {
		w.logger.Warn("ignoring a config change for a user name Kafka would not write", "entity", entity)
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.load(user); err != nil {
		return fmt.Errorf("reading the SCRAM credentials of user %s: %w", user, err)
	}
	return nil
}

func (w *ZKCredentials) load(user string) error {
	config, err := w.zk.UserConfig(user)
	if err != nil {
		return err
	}
	w.update(user, config, w.logger)
	return nil
}

// AddScramCredential writes a user's credential for a mechanism into
// ZooKeeper and notifies every broker, as kafka-configs.sh --zookeeper
// --alter --entity-type users --entity-name <user> --add-config
// '<mechanism>=[iterations=<n>,password=<password>]' does. The user's
// other config (another mechanism, quotas) is kept. iterations 0 means
// Kafka's default, 4096.
func AddScramCredential(z *kafkazk.Client, user, mechanism, password string, iterations int) error {
	if iterations == 0 {
		iterations = ScramMinIterations
	}
	cred, err := NewScramCredential(mechanism, password, iterations)
	if err != nil {
		return err
	}
	config, err := z.UserConfig(user)
	if err != nil {
		return err
	}
	config[mechanism] = cred.String()
	return z.SetUserConfig(user, config)
}

// DeleteScramCredential removes a user's credential for a mechanism
// (kafka-configs.sh --delete-config '<mechanism>').
func DeleteScramCredential(z *kafkazk.Client, user, mechanism string) error {
	config, err := z.UserConfig(user)
	if err != nil {
		return err
	}
	delete(config, mechanism)
	return z.SetUserConfig(user, config)
}

// ParseScramConfigValue reads the value kafka-configs.sh takes for a SCRAM
// mechanism: "[iterations=8192,password=alice-secret]" or
// "[password=alice-secret]" (iterations 0: the default).
func ParseScramConfigValue(v string) (password string, iterations int, err error) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(v), "[")
	if inner, ok = strings.CutSuffix(inner, "]"); !ok {
		return "", 0, fmt.Errorf("security: SCRAM config %q: want [iterations=<n>,password=<password>]", v)
	}
	havePassword := false
	for _, kv := range strings.Split(inner, ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch strings.TrimSpace(k) {
		case "password":
			password, havePassword = val, true
		case "iterations":
			if iterations, err = strconv.Atoi(val); err != nil {
				return "", 0, fmt.Errorf("security: SCRAM config: iterations %q is not a number", val)
			}
		default:
			return "", 0, fmt.Errorf("security: SCRAM config: unknown key %q (iterations, password)", k)
		}
	}
	if !havePassword {
		return "", 0, fmt.Errorf("security: SCRAM config: no password")
	}
	return password, iterations, nil
}
