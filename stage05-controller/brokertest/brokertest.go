// Package brokertest runs stage 05 brokers as separate OS processes
// against a zktest ensemble, for tests in which a crash is a real
// `kill -9`: the process dies with whatever it had in memory, its
// ZooKeeper session is left to expire, and the survivors must notice
// through ZooKeeper alone.
//
//	func TestMain(m *testing.M) { brokertest.Main(m) } // builds cmd/broker once
//
//	ens := zktest.StartEnsemble(t, 3)
//	c := brokertest.Start(t, ens, 3, nil)   // brokers 0, 1, 2, registered
//	c.Broker(1).Kill()                     // SIGKILL
//	c.Broker(1).Start()                    // the same id and log directory
//
// Each broker's log goes to a file in the test's temporary directory; a
// failed test prints the tail of each.
package brokertest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// binary is the broker command built by Main.
var binary string

// Main builds this stage's cmd/broker into a temporary directory, runs the
// tests and removes it. Call it from TestMain.
func Main(m *testing.M) {
	MainWith(m, "github.com/kafkaworkbook/workbook/stage05-controller/cmd/broker")
}

// MainWith is Main for another broker command that takes the same
// arguments and keys: a later stage's (stage 06 runs its own broker, built
// on this one, through this harness).
func MainWith(m *testing.M, brokerPackage string) {
	dir, err := os.MkdirTemp("", "brokertest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "brokertest:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "broker")
	build := exec.Command("go", "build", "-o", binary, brokerPackage)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "brokertest: building the broker:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Defaults are the keys every test broker gets (a test's props override
// them): ZooKeeper sessions as short as zktest's, an ISR lag and
// controlled-shutdown backoff to match, ISR change notifications within a
// tenth of a second of the change (Kafka's 5 to 7.5 s, stage 04's
// isr.change.propagation.* keys, would outlast a frozen broker's session),
// and one partition's replicas on every broker unless a test says
// otherwise.
var Defaults = map[string]string{
	"zookeeper.session.timeout.ms":             fmt.Sprint(zktest.SessionTimeout.Milliseconds()),
	"replica.lag.time.max.ms":                  "2000",
	"controlled.shutdown.retry.backoff.ms":     "200",
	"replica.fetch.wait.max.ms":                "200",
	"isr.change.propagation.check.interval.ms": "20",
	"isr.change.propagation.linger.ms":         "50",
	"isr.change.propagation.max.delay.ms":      "1000",
}

// Cluster is a set of broker processes on one ensemble.
type Cluster struct {
	t     testing.TB
	ens   *zktest.Ensemble
	dir   string
	props map[string]string
	opts  Options

	mu      sync.Mutex
	brokers map[int32]*Broker
}

// Options change how Start runs the brokers.
type Options struct {
	// ZooKeeperProxies puts a zktest.Proxy between each broker and each
	// ZooKeeper server, so that a test can cut one broker off from the
	// whole ensemble (Broker.CutZooKeeper) while the others go on.
	ZooKeeperProxies bool
}

// Start starts n brokers, ids 0..n-1, and waits until each has registered
// in ZooKeeper. They are killed in t.Cleanup.
func Start(t testing.TB, ens *zktest.Ensemble, n int, props map[string]string) *Cluster {
	t.Helper()
	return StartWith(t, ens, n, props, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, ens *zktest.Ensemble, n int, props map[string]string, opts Options) *Cluster {
	t.Helper()
	if binary == "" {
		t.Fatal("brokertest: the broker is not built: call brokertest.Main from TestMain")
	}
	c := &Cluster{t: t, ens: ens, dir: t.TempDir(), props: map[string]string{}, brokers: map[int32]*Broker{}, opts: opts}
	for k, v := range Defaults {
		c.props[k] = v
	}
	for k, v := range props {
		c.props[k] = v
	}
	t.Cleanup(func() {
		for _, b := range c.all() {
			b.kill()
		}
		if t.Failed() {
			for _, b := range c.all() {
				b.printTail(60)
			}
		}
	})
	for id := range int32(n) {
		b := &Broker{c: c, ID: id, logPath: filepath.Join(c.dir, fmt.Sprintf("broker-%d.log", id))}
		if opts.ZooKeeperProxies {
			for _, addr := range ens.Addrs() {
				b.proxies = append(b.proxies, zktest.StartProxy(t, addr))
			}
		}
		c.mu.Lock()
		c.brokers[id] = b
		c.mu.Unlock()
		b.Start()
	}
	return c
}

// Broker returns broker id.
func (c *Cluster) Broker(id int32) *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.brokers[id]
	if !ok {
		c.t.Fatalf("brokertest: no broker %d", id)
	}
	return b
}

func (c *Cluster) all() []*Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		out = append(out, b)
	}
	return out
}

// Addrs lists the running brokers' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, b := range c.all() {
		if b.Running() {
			out = append(out, b.Addr())
		}
	}
	return out
}

// ConnectString is the ensemble's address as the brokers use it.
func (c *Cluster) ConnectString() string { return strings.Join(c.ens.Addrs(), ",") }

// Broker is one broker process.
type Broker struct {
	c       *Cluster
	ID      int32
	logPath string
	proxies []*zktest.Proxy // its paths to the ZooKeeper servers, with Options.ZooKeeperProxies

	mu     sync.Mutex
	cmd    *exec.Cmd     // the running process; nil when stopped. Protected by mu.
	addr   string        // its endpoint, from its log. Protected by mu.
	exited chan struct{} // closed when the process ends. Protected by mu.
	err    error         // how it ended. Protected by mu.
}

// registered is the log line a broker writes once it is in ZooKeeper.
var registered = regexp.MustCompile(`msg="registered in ZooKeeper".* endpoint=(\S+)`)

// Start starts the broker's process (again: same id, same log directory)
// and waits until it has registered.
func (b *Broker) Start() {
	t := b.c.t
	t.Helper()
	b.mu.Lock()
	if b.cmd != nil {
		b.mu.Unlock()
		t.Fatalf("brokertest: broker %d is running", b.ID)
	}
	b.mu.Unlock()
	args := []string{
		"--override", fmt.Sprintf("broker.id=%d", b.ID),
		"--override", "listeners=PLAINTEXT://127.0.0.1:0",
		"--override", "log.dirs=" + b.LogDir(),
		"--override", "zookeeper.connect=" + b.connectString(),
	}
	for k, v := range b.c.props {
		args = append(args, "--override", k+"="+v)
	}
	logFile, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	cmd.Stdout = logFile
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if m := registered.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(logFile, stderr)
		err := cmd.Wait()
		logFile.Close()
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
		close(exited)
	}()
	b.mu.Lock()
	b.cmd, b.exited, b.err = cmd, exited, nil
	b.mu.Unlock()
	select {
	case a := <-addr:
		b.mu.Lock()
		b.addr = a
		b.mu.Unlock()
	case <-exited:
		b.printTail(40)
		t.Fatalf("brokertest: broker %d exited before registering: %v", b.ID, b.exitErr())
	case <-time.After(60 * time.Second):
		b.printTail(40)
		t.Fatalf("brokertest: broker %d did not register within a minute", b.ID)
	}
}

// connectString is how this broker reaches ZooKeeper: straight, or
// through its proxies.
func (b *Broker) connectString() string {
	if len(b.proxies) == 0 {
		return b.c.ConnectString()
	}
	addrs := make([]string, len(b.proxies))
	for i, p := range b.proxies {
		addrs[i] = p.Addr()
	}
	return strings.Join(addrs, ",")
}

// CutZooKeeper cuts this broker off from every ZooKeeper server: no byte
// goes either way, nothing is closed (a network partition). It needs
// Options.ZooKeeperProxies.
func (b *Broker) CutZooKeeper() {
	b.c.t.Helper()
	if len(b.proxies) == 0 {
		b.c.t.Fatal("brokertest: CutZooKeeper needs Options.ZooKeeperProxies")
	}
	for _, p := range b.proxies {
		p.Cut()
	}
}

// RestoreZooKeeper ends the cut.
func (b *Broker) RestoreZooKeeper() {
	for _, p := range b.proxies {
		p.Restore()
	}
}

// LogDir is the broker's log.dirs.
func (b *Broker) LogDir() string { return filepath.Join(b.c.dir, fmt.Sprintf("broker-%d", b.ID)) }

// Addr is the broker's address (its last run's, once stopped).
func (b *Broker) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// Running reports whether the process runs.
func (b *Broker) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return false
	}
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// Pid is the process id of the broker's current run, or 0 if it does not
// run: benchmarks read its CPU time from /proc.
func (b *Broker) Pid() int {
	if !b.Running() {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd.Process.Pid
}

// Kill sends SIGKILL and waits for the process to end: kill -9.
func (b *Broker) Kill() {
	b.c.t.Helper()
	if !b.Running() {
		b.c.t.Fatalf("brokertest: broker %d is not running", b.ID)
	}
	b.kill()
}

func (b *Broker) kill() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Stop sends SIGTERM, as an operator's clean stop does, and waits until
// the process exits; the broker must exit cleanly within timeout.
func (b *Broker) Stop(timeout time.Duration) {
	t := b.c.t
	t.Helper()
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd == nil {
		t.Fatalf("brokertest: broker %d is not running", b.ID)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
	case <-time.After(timeout):
		b.kill()
		t.Fatalf("brokertest: broker %d did not stop within %v of SIGTERM", b.ID, timeout)
	}
	b.mu.Lock()
	b.cmd = nil
	b.mu.Unlock()
	require.NoError(t, b.exitErr(), "broker %d exited uncleanly", b.ID)
}

func (b *Broker) exitErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Log returns the broker's log so far (all its runs).
func (b *Broker) Log() string {
	data, _ := os.ReadFile(b.logPath)
	return string(data)
}

// printTail prints the last n lines of the broker's log to the test log.
func (b *Broker) printTail(n int) {
	lines := strings.Split(strings.TrimRight(b.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	b.c.t.Logf("brokertest: last %d lines of broker %d's log:\n%s", len(lines), b.ID, strings.Join(lines, "\n"))
}
