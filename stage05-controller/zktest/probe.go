package zktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// probeTimeout bounds one four-letter-word exchange. A paused server
// accepts the connection (the kernel does) and never answers.
const probeTimeout = time.Second

// errNotServing is a server's answer when it is up but has no quorum, or
// is still starting: "This ZooKeeper instance is not currently serving
// requests".
var errNotServing = errors.New("zktest: server is not serving requests")

// fourLetterWord sends one of ZooKeeper's four-letter words (srvr, mntr,
// ...) to addr and returns the reply. The server closes the connection
// after replying.
func fourLetterWord(ctx context.Context, addr, word string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s to %s: %w", word, addr, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return "", fmt.Errorf("%s to %s: %w", word, addr, err)
		}
	}
	if _, err := io.WriteString(conn, word); err != nil {
		return "", fmt.Errorf("%s to %s: %w", word, addr, err)
	}
	reply, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("%s to %s: %w", word, addr, err)
	}
	return string(reply), nil
}

// serverMode asks the server at addr for its mode: "leader", "follower" or
// "standalone" while it serves clients. A server that answers but does not
// serve yields errNotServing; one that does not answer, the network error.
func serverMode(ctx context.Context, addr string) (string, error) {
	reply, err := fourLetterWord(ctx, addr, "srvr")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(reply))
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	if strings.Contains(reply, "not currently serving") {
		return "", fmt.Errorf("srvr to %s: %w", addr, errNotServing)
	}
	// Docker's port proxy accepts and closes at once while the server is
	// not listening yet; that reads as an empty reply.
	return "", fmt.Errorf("srvr to %s: no Mode in reply %q", addr, reply)
}
