//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runWatched runs go test -json as cmd.Run does, copying its standard
// output to out, and sends SIGQUIT to the test binary (go test's child)
// when one top-level test has run for longer than limit: the binary then
// dumps its goroutines and exits, go test reports it, and the dump is
// that test's output.
func runWatched(cmd *exec.Cmd, out *bytes.Buffer, limit time.Duration) error {
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		return err
	}
	var mu sync.Mutex
	running := map[string]time.Time{} // top-level tests under way, since when
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			mu.Lock()
			out.Write(line)
			out.WriteByte('\n')
			var ev testEvent
			if len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &ev) == nil && ev.Test != "" && !strings.Contains(ev.Test, "/") {
				switch ev.Action {
				case "run":
					running[ev.Test] = time.Now()
				case "pass", "fail", "skip":
					delete(running, ev.Test)
				}
			}
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(min(limit/4, time.Second))
		defer tick.Stop()
		quit := false
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			over := false
			for _, since := range running {
				over = over || time.Since(since) > limit
			}
			mu.Unlock()
			if over && !quit {
				quit = true
				quitChildren(cmd.Process.Pid)
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	pw.Close()
	<-done
	return err
}

// quitChildren sends SIGQUIT to the processes whose parent is pid: while
// a test runs, go test's one child is the test binary. Linux lists each
// thread's children in /proc (a Go program forks from any of its
// threads); elsewhere, pgrep.
func quitChildren(pid int) {
	var children []string
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			children = append(children, strings.Fields(string(data))...)
		}
	}
	if len(files) == 0 {
		out, err := exec.Command("pgrep", "-P", strconv.Itoa(pid)).Output()
		if err != nil {
			return
		}
		children = strings.Fields(string(out))
	}
	for _, f := range children {
		if child, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(child, syscall.SIGQUIT)
		}
	}
}
