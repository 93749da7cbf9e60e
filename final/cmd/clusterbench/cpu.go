package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// The groups a cpuMeter reports, in the CPU table's order. "other" is the
// machine's busy time that none of the groups used: the kernel's network
// work on softirqs that no process is charged for, containerd's shims,
// and whatever else runs on the machine (on a shared machine, other
// people's work).
var cpuGroups = []string{"client", "brokers", "zookeeper", "docker-proxy", "other"}

// A cpuMeter reads the CPU time each part of the set-up has used, from
// /proc: this process (the clients under test), each container's PID 1 (a
// broker, or ZooKeeper's JVM), Docker's userland proxies (docker-proxy:
// a client on 127.0.0.1 reaches a published port through one, which
// copies every byte between two sockets) and the machine's total
// (/proc/stat). Reading /proc needs the containers to run on this
// machine's kernel, as Docker's engine on Linux does.
type cpuMeter struct {
	pids map[string][]int // by group; "client" is this process
	// off says why the meter does not meter, when it cannot read the
	// processes (Docker Desktop's containers run in a VM, whose processes
	// this machine's /proc does not show); nil when it does.
	off error
}

// A cpuSample is the CPU times at one moment.
type cpuSample struct {
	at        time.Time
	used      map[string]time.Duration // by group, each process's user + system time
	busy, all time.Duration            // the machine's, summed over every CPU
}

// newCPUMeter finds the processes of c's containers and the userland
// proxies; the brokers are procs' when they run as processes. With a nil
// c, it meters this process and the machine.
func newCPUMeter(ctx context.Context, c *cluster.Cluster, procs *processes) (*cpuMeter, error) {
	m := &cpuMeter{pids: map[string][]int{"client": {os.Getpid()}}}
	if c == nil {
		return m, nil
	}
	if runtime.GOOS != "linux" {
		m.off = fmt.Errorf("the containers' processes are not this machine's on %s", runtime.GOOS)
		return m, nil
	}
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	groups := map[string][]cluster.Node{"brokers": c.Brokers(), "zookeeper": c.ZooKeepers()}
	if procs != nil {
		m.pids["brokers"] = procs.pids()
		delete(groups, "brokers")
	}
	for group, nodes := range groups {
		for _, n := range nodes {
			in, err := cli.ContainerInspect(ctx, n.Name, client.ContainerInspectOptions{})
			if err != nil {
				return nil, fmt.Errorf("inspect %s: %w", n.Name, err)
			}
			if in.Container.State == nil || in.Container.State.Pid == 0 {
				return nil, fmt.Errorf("%s is not running", n.Name)
			}
			m.pids[group] = append(m.pids[group], in.Container.State.Pid)
		}
	}
	m.pids["docker-proxy"], err = pidsNamed("docker-proxy")
	if err != nil {
		return nil, err
	}
	if _, err := m.sample(); err != nil {
		m.off = err
	}
	return m, nil
}

// pidsNamed lists the processes whose command is name. Every
// docker-proxy on the machine counts: only one cluster runs at a time
// (the Makefile's lock), so the others, if any, are idle.
func pidsNamed(name string) ([]int, error) {
	comms, err := filepath.Glob("/proc/[0-9]*/comm")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, path := range comms {
		b, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(b)) != name {
			continue // gone meanwhile, or another command
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		pids = append(pids, pid)
	}
	return pids, nil
}

// sample reads every group's CPU time and the machine's now.
func (m *cpuMeter) sample() (cpuSample, error) {
	s := cpuSample{at: time.Now(), used: map[string]time.Duration{}}
	if m.off != nil {
		return s, m.off
	}
	for group, pids := range m.pids {
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				return s, fmt.Errorf("%s: %w", group, err)
			}
			t, err := processCPU(string(b))
			if err != nil {
				return s, fmt.Errorf("%s: /proc/%d/stat: %w", group, pid, err)
			}
			s.used[group] += t
		}
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	s.busy, s.all, err = machineCPU(string(b))
	return s, err
}

// processCPU reads a process's user and system time (every thread's)
// from its /proc/PID/stat line. The command, field 2, is in parentheses
// and may hold spaces, so fields are counted from the last ')'.
func processCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command field")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, state
	if len(f) < 13 {
		return 0, errors.New("too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 and 15: utime, stime
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// machineCPU reads /proc/stat's first line, every CPU's time by state:
// busy is all but idle and iowait. Guest time is already in user time.
func machineCPU(stat string) (busy, all time.Duration, err error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var t [8]int64 // user nice system idle iowait irq softirq steal
	for i := range t {
		if t[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
	}
	var sum int64
	for _, v := range t {
		sum += v
	}
	idle := t[3] + t[4]
	return time.Duration(sum-idle) * clockTick, time.Duration(sum) * clockTick, nil
}

// cpuUse is the CPUs each group kept busy between two samples, on
// average (1.0 is one core all the time), with the machine's idle CPUs.
type cpuUse struct {
	cores map[string]float64 // by group, "other" included; nil if a sample failed
	idle  float64
}

func usage(a, b cpuSample) cpuUse {
	if len(a.used) == 0 || len(b.used) == 0 {
		return cpuUse{} // a sample failed
	}
	wall := b.at.Sub(a.at).Seconds()
	u := cpuUse{cores: map[string]float64{}}
	var accounted float64
	for group, t := range b.used {
		u.cores[group] = (t - a.used[group]).Seconds() / wall
		accounted += u.cores[group]
	}
	busy := (b.busy - a.busy).Seconds() / wall
	u.cores["other"] = max(busy-accounted, 0)
	u.idle = (b.all - a.all - (b.busy - a.busy)).Seconds() / wall
	return u
}
