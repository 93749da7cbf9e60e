package kafkazk

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// build 05.A: brokers in ZooKeeper: register, list, and run for controller
// tests: TestZooKeeperLayout

// RegisteredBroker is a live broker as /brokers/ids shows it: its
// registration and its epoch.
type RegisteredBroker struct {
	BrokerInfo
	// Epoch is the broker epoch (KIP-380): the zxid that created the
	// registration znode. It grows each time the broker registers (after
	// a restart or a lost session), so a controller's request meant for an
	// earlier incarnation is recognizable (STALE_BROKER_EPOCH).
	Epoch int64
}

// RegisterBroker creates the broker's ephemeral registration and returns
// its broker epoch. As Kafka, it creates the znode empty and sets its data
// in one multi, whose answer carries the znode's stat, and so the epoch,
// in the same round trip (the registration is then at version 1). If the
// znode exists and this session owns it (a retry after a lost reply),
// that one stands; another session's is ErrBrokerIDTaken.
func (c *Client) RegisterBroker(b BrokerInfo) (epoch int64, err error) {
	path := BrokerPath(b.ID)
	resp, _, err := c.multi(&zk.CreateRequest{Path: path, Acl: acl, Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: path, Data: b.Encode(), Version: 0})
	if err == nil {
		return resp[1].Stat.Czxid, nil
	}
	if !errors.Is(err, zk.ErrNodeExists) {
		return 0, fmt.Errorf("kafkazk: register broker %d: %w", b.ID, err)
	}
	_, stat, err2 := c.conn.Get(path)
	if err2 != nil {
		return 0, fmt.Errorf("kafkazk: register broker %d: %w", b.ID, err2)
	}
	if stat.EphemeralOwner != c.conn.SessionID() {
		return 0, fmt.Errorf("%w: %s (session %#x)", ErrBrokerIDTaken, path, stat.EphemeralOwner)
	}
	return stat.Czxid, nil
}

// Brokers returns the registered brokers, by id.
func (c *Client) Brokers() ([]RegisteredBroker, error) {
	ids, _, err := c.conn.Children(BrokerIDsPath)
	if err != nil {
		return nil, fmt.Errorf("kafkazk: list %s: %w", BrokerIDsPath, err)
	}
	return c.brokers(ids)
}

// BrokersW is Brokers, with a watch that fires once when a broker
// registers or goes.
func (c *Client) BrokersW() ([]RegisteredBroker, <-chan zk.Event, error) {
	ids, _, ch, err := c.conn.ChildrenW(BrokerIDsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkazk: watch %s: %w", BrokerIDsPath, err)
	}
	bs, err := c.brokers(ids)
	return bs, ch, err
}

func (c *Client) brokers(names []string) ([]RegisteredBroker, error) {
	var out []RegisteredBroker
	for _, name := range names {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			continue // not a broker id; Kafka ignores it too
		}
		data, stat, err := c.conn.Get(BrokerPath(int32(id)))
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("kafkazk: read %s: %w", BrokerPath(int32(id)), err)
		}
		info, err := DecodeBrokerInfo(int32(id), data)
		if err != nil {
			return nil, err
		}
		out = append(out, RegisteredBroker{BrokerInfo: info, Epoch: stat.Czxid})
	}
	slices.SortFunc(out, func(a, b RegisteredBroker) int { return int(a.ID) - int(b.ID) })
	return out, nil
}

// ClusterID returns /cluster/id, creating it with a new id if no broker
// has yet (Kafka's getOrCreateClusterId). A new id is a random Kafka
// Uuid, as a topic id is written.
func (c *Client) ClusterID() (string, error) {
	for {
		data, _, err := c.conn.Get(ClusterIDPath)
		if err == nil {
			return DecodeClusterID(data)
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return "", fmt.Errorf("kafkazk: read %s: %w", ClusterIDPath, err)
		}
		var id TopicID
		_, _ = rand.Read(id[:])
		if err := c.createPersistent("/cluster", nil); err != nil {
			return "", err
		}
		_, err = c.conn.Create(ClusterIDPath, EncodeClusterID(id.String()), 0, acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) { // another broker's won: read it
			return "", fmt.Errorf("kafkazk: create %s: %w", ClusterIDPath, err)
		}
	}
}

// ControllerID returns the controller's broker id, or ok false when there
// is none.
func (c *Client) ControllerID() (id int32, ok bool, err error) {
	data, _, err := c.conn.Get(ControllerPath)
	if errors.Is(err, zk.ErrNoNode) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, fmt.Errorf("kafkazk: read %s: %w", ControllerPath, err)
	}
	info, err := DecodeControllerInfo(data)
	if err != nil {
		return -1, false, err
	}
	return info.BrokerID, true, nil
}

// ControllerW is ControllerID with a watch that fires once when
// /controller is created, deleted or changed (an exists watch, which
// ZooKeeper sets on a znode that does not exist as well).
func (c *Client) ControllerW() (id int32, ok bool, changed <-chan zk.Event, err error) {
	exists, _, ch, err := c.conn.ExistsW(ControllerPath)
	if err != nil {
		return -1, false, nil, fmt.Errorf("kafkazk: watch %s: %w", ControllerPath, err)
	}
	if !exists {
		return -1, false, ch, nil
	}
	id, ok, err = c.ControllerID()
	return id, ok, ch, err
}

// ControllerEpochValue reads /controller_epoch: the epoch and the
// znode's version (0 and -1 when it does not exist yet).
func (c *Client) ControllerEpochValue() (ControllerEpoch, error) {
	data, stat, err := c.conn.Get(ControllerEpochPath)
	if errors.Is(err, zk.ErrNoNode) {
		return ControllerEpoch{Epoch: 0, ZkVersion: -1}, nil
	}
	if err != nil {
		return ControllerEpoch{}, fmt.Errorf("kafkazk: read %s: %w", ControllerEpochPath, err)
	}
	epoch, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
	if err != nil {
		return ControllerEpoch{}, fmt.Errorf("kafkazk: %s holds %q", ControllerEpochPath, data)
	}
	return ControllerEpoch{Epoch: int32(epoch), ZkVersion: stat.Version}, nil
}

// ElectController is the controller election of seed §1.1, as Kafka
// 2.x runs it (KafkaZkClient.registerControllerAndIncrementControllerEpoch):
// one atomic step that exactly one broker wins. The others get
// ErrControllerExists. The winner's ControllerEpoch fences every write it
// makes from then on.
func (c *Client) ElectController(brokerID int32, now time.Time) (ControllerEpoch, error) {
	cur, err := c.ControllerEpochValue()
	if err != nil {
		return ControllerEpoch{}, err
	}
	if cur.ZkVersion < 0 {
		if err := c.createPersistent(ControllerEpochPath, EncodeControllerEpoch(0)); err != nil {
			return ControllerEpoch{}, err
		}
		if cur, err = c.ControllerEpochValue(); err != nil {
			return ControllerEpoch{}, err
		}
	}
	// exercise 05.1: run for controller: create /controller and bump /controller_epoch in one multi
	// hint: both writes go in one multi, the epoch's at the version read, so that exactly one broker wins; the version the winner's write leaves is what fences it
	// tests: TestZooKeeperLayout
	next := cur.Epoch + 1
	resp, i, err := c.multi(
		&zk.CreateRequest{Path: ControllerPath, Data: ControllerInfo{BrokerID: brokerID, Timestamp: now}.Encode(), Acl: acl, Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: ControllerEpochPath, Data: EncodeControllerEpoch(next), Version: cur.ZkVersion})
	switch {
	case err == nil:
		return ControllerEpoch{Epoch: next, ZkVersion: resp[1].Stat.Version}, nil
	case i == 0 && errors.Is(err, zk.ErrNodeExists), i == 1 && errors.Is(err, zk.ErrBadVersion):
		return ControllerEpoch{}, ErrControllerExists
	default:
		return ControllerEpoch{}, fmt.Errorf("kafkazk: controller election: %w", err)
	}
	// end exercise
}

// ResignController deletes /controller if this session owns it, so the
// other brokers elect at once (a clean stop, or a controller giving up).
func (c *Client) ResignController() error {
	_, stat, err := c.conn.Get(ControllerPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kafkazk: read %s: %w", ControllerPath, err)
	}
	if stat.EphemeralOwner != c.conn.SessionID() {
		return nil // not ours (any more)
	}
	if err := c.conn.Delete(ControllerPath, stat.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("kafkazk: delete %s: %w", ControllerPath, err)
	}
	return nil
}

// end build
