package store

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// metaPropertiesFile is Kafka's meta.properties: which broker and cluster
// the log directory belongs to.
const metaPropertiesFile = "meta.properties"

// loadMetaProperties reads meta.properties, writing it on first use with
// cluster (or a random id when cluster is ""). A directory that belongs to
// another broker id, or to another cluster than a given one, is refused,
// as Kafka does.
func loadMetaProperties(dir string, brokerID int32, cluster string) (clusterID string, err error) {
	path := filepath.Join(dir, metaPropertiesFile)
	props, err := ReadPropertiesFile(path)
	if errors.Is(err, os.ErrNotExist) {
		clusterID = cluster
		if clusterID == "" {
			id := make([]byte, 16)
			rand.Read(id)
			clusterID = base64.RawURLEncoding.EncodeToString(id)
		}
		content := fmt.Sprintf("#\n#%s\nversion=0\nbroker.id=%d\ncluster.id=%s\n",
			time.Now().UTC().Format(time.UnixDate), brokerID, clusterID)
		if err := commitlog.WriteFileAtomic(path, []byte(content)); err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
		return clusterID, nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if got := props["broker.id"]; got != strconv.Itoa(int(brokerID)) {
		return "", fmt.Errorf("log directory %s belongs to broker.id %s, not %d (see %s)", dir, got, brokerID, path)
	}
	if got := props["cluster.id"]; cluster != "" && got != cluster {
		return "", fmt.Errorf("log directory %s belongs to cluster %s, not %s, the cluster this broker joins (see %s)", dir, got, cluster, path)
	}
	return props["cluster.id"], nil
}
