package commitlog

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Kafka's checkpoint files, one of each per log directory.
const (
	RecoveryPointCheckpointFile  = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	// CleanShutdownFile marks a log directory whose logs were all closed
	// cleanly; its presence lets the next start skip recovery.
	CleanShutdownFile = ".kafka_cleanshutdown"
)

// checkpointVersion is the first line of every checkpoint file.
const checkpointVersion = 0

// TopicPartition names a partition; its log lives in the directory
// "<topic>-<partition>".
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Compare orders partitions by topic, then number, for slices.SortFunc.
func (tp TopicPartition) Compare(other TopicPartition) int {
	if c := strings.Compare(tp.Topic, other.Topic); c != 0 {
		return c
	}
	return cmp.Compare(tp.Partition, other.Partition)
}

// ParseTopicPartition reads a log directory name. The topic is everything
// before the last '-' (topic names may contain '-').
func ParseTopicPartition(dirName string) (TopicPartition, error) {
	i := strings.LastIndexByte(dirName, '-')
	if i <= 0 {
		return TopicPartition{}, fmt.Errorf("%q is not a <topic>-<partition> directory name", dirName)
	}
	p, err := strconv.ParseInt(dirName[i+1:], 10, 32)
	if err != nil || p < 0 {
		return TopicPartition{}, fmt.Errorf("%q is not a <topic>-<partition> directory name", dirName)
	}
	return TopicPartition{Topic: dirName[:i], Partition: int32(p)}, nil
}

// WriteCheckpoint writes Kafka's checkpoint text format: the version, the
// number of entries, then one entry per line. It writes a temporary file,
// fsyncs it and renames it over path, so a crash leaves either the old file
// or the new one. Stage 03's leader-epoch-checkpoint uses it with its own
// entries.
func WriteCheckpoint(path string, entries []string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(entries))
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	if err := WriteFileAtomic(path, b.Bytes()); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// WriteFileAtomic replaces the file at path with data so that a crash
// leaves either the old content or the new: it writes a temporary file,
// fsyncs it, renames it over path and fsyncs the directory.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadCheckpoint reads a checkpoint file's entries. A missing file is no
// entries; a malformed one is an error that names the file and the line.
func ReadCheckpoint(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	bad := func(line int, why string) error {
		return fmt.Errorf("malformed checkpoint %s, line %d: %s", path, line, why)
	}
	if len(lines) < 2 {
		return nil, bad(len(lines)+1, "missing version or count")
	}
	if v, err := strconv.Atoi(lines[0]); err != nil || v != checkpointVersion {
		return nil, bad(1, fmt.Sprintf("version %q, want %d", lines[0], checkpointVersion))
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, bad(2, fmt.Sprintf("count %q with %d entries", lines[1], len(lines)-2))
	}
	return lines[2:], nil
}

// WriteOffsetCheckpoint writes "topic partition offset" entries, the format
// of the recovery point, log start offset and high watermark checkpoints.
func WriteOffsetCheckpoint(path string, offsets map[TopicPartition]int64) error {
	entries := make([]string, 0, len(offsets))
	for tp, off := range offsets {
		entries = append(entries, fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, off))
	}
	return WriteCheckpoint(path, entries)
}

// ReadOffsetCheckpoint reads what WriteOffsetCheckpoint wrote.
func ReadOffsetCheckpoint(path string) (map[TopicPartition]int64, error) {
	entries, err := ReadCheckpoint(path)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]int64, len(entries))
	for i, e := range entries {
		f := strings.Fields(e)
		if len(f) != 3 {
			return nil, fmt.Errorf("malformed checkpoint %s, line %d: %q", path, i+3, e)
		}
		p, perr := strconv.ParseInt(f[1], 10, 32)
		off, oerr := strconv.ParseInt(f[2], 10, 64)
		if perr != nil || oerr != nil {
			return nil, fmt.Errorf("malformed checkpoint %s, line %d: %q", path, i+3, e)
		}
		out[TopicPartition{Topic: f[0], Partition: int32(p)}] = off
	}
	return out, nil
}

// syncDir fsyncs a directory, making a rename in it durable.
// RemoveFileDurably removes a file and fsyncs its directory, so that a
// crash after it returns cannot bring the file back.
func RemoveFileDurably(path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
