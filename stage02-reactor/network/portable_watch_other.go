//go:build !unix

package network

// watch implements responder: on systems without MSG_PEEK the portable
// server does not watch a waiting request's connection; Done still closes
// on idle time-out and shutdown.
func (c *portableConn) watch(*Request) {}

func (c *portableConn) stopWatching() {}
